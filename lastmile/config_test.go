package lastmile

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/veerhq/veer/config"
)

func TestConfigZeroValueIsValid(t *testing.T) {
	must(t, Config{}.Validate())
	d := Config{}.withDefaults()
	if d.Race.TCPDelay != 250*time.Millisecond || d.Race.BrokenBase != 5*time.Minute || d.Port != 443 ||
		len(d.Steps) != 4 || len(d.DNS.Order) != 5 || d.DNS.MaxStale != 72*time.Hour {
		t.Fatalf("defaults: %+v", d)
	}
}

func TestConfigParseAndValidate(t *testing.T) {
	good := `
steps: [fallback_ip, direct]
dns:
  order: [private_udp, system]
  private_servers: ["10.0.0.53", "10.0.1.53:5353"]
  doh_url: https://1.1.1.1/dns-query
  doh_method: POST
  expected: {"example.com": ["203.0.113.0/24"]}
  cache_file: /var/lib/app/dns.json
race:
  tcp_delay: 300ms
fallback_ips:
  - addr: 203.0.113.9
    server_name: api.example.com
`
	var c Config
	must(t, config.Parse([]byte(good), "lastmile.yaml", &c))
	if c.Race.TCPDelay != 300*time.Millisecond || c.DNS.DoHMethod != "POST" || c.FallbackIPs[0].ServerName != "api.example.com" {
		t.Fatalf("%+v", c)
	}
	bad := `
steps: [direct, teleport]
dns:
  private_servers: ["ns.example"]
  doh_url: http://insecure/dns-query
  expected: {"example.com": ["not-a-cidr"]}
scheduler:
  url: ftp://x
race:
  tcp_delay: -1s
fallback_ips:
  - addr: lb.example.com
`
	err := config.Parse([]byte(bad), "lastmile.yaml", &c)
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, field := range []string{"steps[1]", "dns.private_servers[0]", "dns.doh_url", "dns.expected.example.com[0]",
		"scheduler.url", "race.tcp_delay", "fallback_ips[0].addr"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Line == 0 {
		t.Errorf("no line number: %v", err)
	}
}
