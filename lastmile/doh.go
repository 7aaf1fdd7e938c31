package lastmile

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/miekg/dns"
	"github.com/veerhq/veer/outcome"
)

// dohMediaType is the RFC 8484 media type of a DNS wire-format message.
const dohMediaType = "application/dns-message"

// maxDoHResponse bounds a DoH response body (a DNS message is at most 64 KiB).
const maxDoHResponse = 65535

// dohExchange sends q to the configured DoH endpoint, GET (?dns=, base64url
// without padding) or POST, per RFC 8484. The message ID is 0 as the RFC
// recommends for cache friendliness.
func (r *Resolver) dohExchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	q = q.Copy()
	q.Id = 0
	wire, err := q.Pack()
	if err != nil {
		return nil, outcome.Wrap(outcome.DNSServerFailure, err)
	}
	var req *http.Request
	if r.cfg.DoHMethod == http.MethodPost {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, r.cfg.DoHURL, bytes.NewReader(wire))
		if err == nil {
			req.Header.Set("Content-Type", dohMediaType)
		}
	} else {
		sep := "?"
		if bytes.ContainsRune([]byte(r.cfg.DoHURL), '?') {
			sep = "&"
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, r.cfg.DoHURL+sep+"dns="+base64.RawURLEncoding.EncodeToString(wire), nil)
	}
	if err != nil {
		return nil, outcome.Wrap(outcome.DNSServerFailure, err)
	}
	req.Header.Set("Accept", dohMediaType)
	resp, err := r.doh.Do(req)
	if err != nil {
		return nil, outcome.Wrap(dnsKind(ctx, err), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, outcome.Wrap(outcome.DNSServerFailure, fmt.Errorf("%w: DoH HTTP status %d", ErrRcode, resp.StatusCode))
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != dohMediaType {
		return nil, outcome.Wrap(outcome.DNSServerFailure, fmt.Errorf("%w: DoH content type %q", ErrMismatch, mt))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDoHResponse+1))
	if err != nil {
		return nil, outcome.Wrap(dnsKind(ctx, err), err)
	}
	if len(body) > maxDoHResponse {
		return nil, outcome.Wrap(outcome.DNSServerFailure, fmt.Errorf("%w: DoH body too large", ErrMismatch))
	}
	m := new(dns.Msg)
	if err := m.Unpack(body); err != nil {
		return nil, outcome.Wrap(outcome.DNSServerFailure, err)
	}
	return m, nil
}
