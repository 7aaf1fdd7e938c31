package h1

import (
	"bufio"
	"io"
	"net/http"
)

// The client's response reader: the common answer (HTTP/1.1, a final
// status with a body, one Content-Length, no field that changes the
// framing or the header) parsed from the reader's buffer in place of
// http.ReadResponse, whose textproto reader allocates per line and whose
// transfer reader, body and limit reader are allocations of their own;
// everything else goes to http.ReadResponse, which is the reference:
// FuzzReadResponse holds the two to the same Response (status, protocol,
// header, length, close, body bytes and errors, bytes consumed).

// ownResponse is a response read by fastResponse, its body reader and
// the client's body wrapper in one allocation.
type ownResponse struct {
	resp http.Response
	body sizedBody
	h1   h1Body
}

// sizedBody is net/http's response body for a Content-Length (its body
// with an io.LimitedReader and no trailer): the end of the stream before
// the length is io.ErrUnexpectedEOF, and io.EOF comes with the last bytes.
type sizedBody struct {
	lr     io.LimitedReader
	sawEOF bool
}

// Close does nothing: h1Body, the only holder, ends the exchange itself
// and never reads after its Close.
func (b *sizedBody) Close() error { return nil }

func (b *sizedBody) Read(p []byte) (int, error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	n, err := b.lr.Read(p)
	if err == io.EOF {
		b.sawEOF = true
		if b.lr.N > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	if err == nil && n > 0 && b.lr.N == 0 {
		err = io.EOF
		b.sawEOF = true
	}
	return n, err
}

// fastResponse reads the response to req from br when its head is in
// br's buffer whole and is of the common kind: "HTTP/1.1", a status from
// 200 to 999 other than 204 and 304, fields that parseFields accepts,
// exactly one Content-Length of 1 to 18 digits, and none of
// Transfer-Encoding, Trailer, Connection or Pragma (which make
// http.ReadResponse change the framing, the close or the header); req is
// not a HEAD. It returns nil, having consumed nothing, for any other head:
// the caller reads it with http.ReadResponse.
func fastResponse(br *bufio.Reader, req *http.Request) *ownResponse {
	if req.Method == http.MethodHead {
		return nil
	}
	buf, _ := br.Peek(br.Buffered())
	scan := 0
	end := headEnd(buf, &scan)
	if end < len("HTTP/1.1 200\n\n") || string(buf[:len("HTTP/1.1 ")]) != "HTTP/1.1 " {
		return nil
	}
	code := 0
	for _, c := range buf[9:12] {
		if c < '0' || c > '9' {
			return nil
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil
	}
	if c := buf[12]; c != ' ' && c != '\r' && c != '\n' {
		return nil
	}
	head := string(buf[:end])
	line, rest := cutLine(head)
	h, err := parseFields(rest)
	if err != nil {
		return nil
	}
	for _, k := range [...]string{"Transfer-Encoding", "Trailer", "Connection", "Pragma"} {
		if _, ok := h[k]; ok {
			return nil
		}
	}
	cl := h["Content-Length"]
	if len(cl) != 1 || len(cl[0]) == 0 || len(cl[0]) > 18 {
		return nil
	}
	n := int64(0)
	for i := 0; i < len(cl[0]); i++ {
		c := cl[0][i]
		if c < '0' || c > '9' {
			return nil
		}
		n = n*10 + int64(c-'0')
	}
	_, _ = br.Discard(end)
	r := &ownResponse{}
	r.resp = http.Response{
		Status: line[9:], StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: n, Request: req, Body: http.NoBody,
	}
	if n > 0 {
		r.body.lr = io.LimitedReader{R: br, N: n}
		r.resp.Body = &r.body
	}
	return r
}
