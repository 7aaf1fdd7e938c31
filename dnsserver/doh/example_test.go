package doh_test

import (
	"bytes"
	"fmt"
	"net/http/httptest"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/dnsserver"
	"github.com/veerhq/veer/dnsserver/doh"
	"github.com/veerhq/veer/obs"
)

// The RFC 8484 handler on its own, mounted in any http.Server; here asked
// with an in-memory POST.
func ExampleNewHandler() {
	s, err := dnsserver.New(dnsserver.Config{Data: dnsserver.Data{Zones: []dnsserver.Zone{{
		Origin: "example.test.", Records: []string{"www 60 A 192.0.2.10"},
	}}}}, dnsserver.Options{Registerer: prometheus.NewRegistry(), Logger: obs.Discard})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	h := doh.NewHandler(s)
	q := new(dns.Msg)
	q.SetQuestion("www.example.test.", dns.TypeA)
	wire, _ := q.Pack()
	req := httptest.NewRequest("POST", "/dns-query", bytes.NewReader(wire))
	req.Header.Set("Content-Type", doh.MediaType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var r dns.Msg
	_ = r.Unpack(rec.Body.Bytes())
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"))
	fmt.Println(r.Answer[0].(*dns.A).A)
	// Output:
	// 200 application/dns-message max-age=60
	// 192.0.2.10
}
