package dnsserver

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestUDPBatchesAnswerEachSource: many clients send bursts at once, so
// that one read carries datagrams of several sources; every client gets
// exactly its own answers (its IDs, its names in the case it asked),
// over IPv4 and IPv6.
func TestUDPBatchesAnswerEachSource(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(listen, func(t *testing.T) {
			cfg := parseConfig(t, testZone)
			cfg.Listen = listen
			cfg.UDPWorkers = 1
			s := startServer(t, cfg, Options{})
			const clients, burst = 8, 64
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- udpBurst(s.Addr().String(), c, burst)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// udpBurst sends burst queries from one socket without waiting, then reads
// the answers and checks each against what this client asked.
func udpBurst(addr string, client, burst int) error {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	names := map[uint16]string{}
	for i := range burst {
		q := new(dns.Msg)
		name := "WwW.example.test."
		if (client+i)%2 == 1 {
			name = "mAiL.Example.Test."
		}
		q.SetQuestion(name, dns.TypeA)
		q.Id = uint16(client<<8 | i)
		names[q.Id] = name
		w, _ := q.Pack()
		if _, err := conn.Write(w); err != nil {
			return err
		}
	}
	buf := make([]byte, 65535)
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for len(names) > 0 {
		n, err := conn.Read(buf)
		if err != nil {
			return fmt.Errorf("client %d: %d answers missing: %v", client, len(names), err)
		}
		var m dns.Msg
		if err := m.Unpack(buf[:n]); err != nil {
			return err
		}
		name, ok := names[m.Id]
		if !ok || m.Question[0].Name != name {
			return fmt.Errorf("client %d: answer %d for %q, not one of ours", client, m.Id, m.Question[0].Name)
		}
		delete(names, m.Id)
		if name[0] == 'W' && (len(m.Answer) != 2 || m.Answer[0].Header().Name != name) {
			return fmt.Errorf("client %d: answer %v for %s", client, m.Answer, name)
		}
	}
	return nil
}
