package up

import (
	"net"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/veerhq/veer/internal/listenpair"
)

// hijackAddr is where the hijacking public resolver sends every name (a
// loopback address nothing listens on: a parked page that never answers
// the app).
const hijackAddr = "127.0.0.9"

// publicDNS is the devices' "public" resolver (seed 002's first step, the
// carrier's DNS): it answers the access domains like the private DNS until
// chaos switches it to hijack, then answers hijackAddr for every name.
type publicDNS struct {
	records map[string][]string // fqdn (lower case) -> IPv4s
	hijack  atomic.Bool
	udp     *dns.Server
	tcp     *dns.Server
	addr    string
}

func startPublicDNS(records map[string][]string) (*publicDNS, error) {
	ln, pc, err := listenpair.Listen("127.0.0.1:0") // TCP and UDP on one port, retried when the twin is taken
	if err != nil {
		return nil, err
	}
	p := &publicDNS{records: records, addr: pc.LocalAddr().String()}
	p.udp = &dns.Server{PacketConn: pc, Handler: p}
	p.tcp = &dns.Server{Listener: ln, Handler: p}
	started := make(chan struct{}, 2)
	p.udp.NotifyStartedFunc = func() { started <- struct{}{} }
	p.tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	go func() { _ = p.udp.ActivateAndServe() }()
	go func() { _ = p.tcp.ActivateAndServe() }()
	<-started
	<-started
	return p, nil
}

func (p *publicDNS) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	m.RecursionAvailable = true
	if len(q.Question) == 1 {
		qq := q.Question[0]
		name := strings.ToLower(qq.Name)
		ips, ok := p.records[name]
		hijack := p.hijack.Load()
		if hijack {
			ips, ok = []string{hijackAddr}, true
		}
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case qq.Qtype == dns.TypeA:
			for _, ip := range ips {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 10}, A: net.ParseIP(ip).To4()})
			}
		}
	}
	_ = w.WriteMsg(m)
}

func (p *publicDNS) close() {
	_ = p.udp.Shutdown()
	_ = p.tcp.Shutdown()
}
