package asyncnats

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// A pack's encoding, named by its Veer-Pack header: "1" is a JSON array of
// packItem (bodies in base64; what earlier versions wrote, still read),
// "2" (written now) is, per item, three length-prefixed fields (uvarint
// length, bytes): the explicit id ("" in an ingest pack), the JSON meta,
// and the raw body. It saves base64's third and its encoding time on a
// path that every packed submission takes twice (ingest, distribution).
const (
	packJSON   = "1"
	packBinary = "2"
)

var errBadPack = errors.New("asyncnats: malformed pack")

// encodePack writes items in the binary form.
func encodePack(items []packItem) ([]byte, error) {
	size := 0
	for _, it := range items {
		size += len(it.ID) + len(it.Body) + 600
	}
	b := make([]byte, 0, size)
	for _, it := range items {
		m, err := json.Marshal(it.Meta)
		if err != nil {
			return nil, err
		}
		b = binary.AppendUvarint(b, uint64(len(it.ID)))
		b = append(b, it.ID...)
		b = binary.AppendUvarint(b, uint64(len(m)))
		b = append(b, m...)
		b = binary.AppendUvarint(b, uint64(len(it.Body)))
		b = append(b, it.Body...)
	}
	return b, nil
}

// decodePack reads a pack in either form (by its header). A body aliases
// data.
func decodePack(h nats.Header, data []byte) ([]packItem, error) {
	switch h.Get(packHeader) {
	case packJSON:
		var pack []packItem
		if err := json.Unmarshal(data, &pack); err != nil {
			return nil, fmt.Errorf("%w: %w", errBadPack, err)
		}
		return pack, nil
	case packBinary:
	default:
		return nil, fmt.Errorf("%w: unknown encoding %q", errBadPack, h.Get(packHeader))
	}
	var out []packItem
	field := func() ([]byte, error) {
		n, k := binary.Uvarint(data)
		if k <= 0 || n > uint64(len(data)-k) {
			return nil, errBadPack
		}
		f := data[k : k+int(n)]
		data = data[k+int(n):]
		return f, nil
	}
	for len(data) > 0 {
		id, err := field()
		if err != nil {
			return nil, err
		}
		m, err := field()
		if err != nil {
			return nil, err
		}
		body, err := field()
		if err != nil {
			return nil, err
		}
		it := packItem{ID: string(id)}
		if err := json.Unmarshal(m, &it.Meta); err != nil {
			return nil, fmt.Errorf("%w: %w", errBadPack, err)
		}
		if len(body) > 0 {
			it.Body = body
		}
		out = append(out, it)
	}
	return out, nil
}
