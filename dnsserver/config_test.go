package dnsserver

import (
	"errors"
	"strings"
	"testing"

	"github.com/veerhq/veer/config"
)

// TestConfigErrors checks that every bad field is named with its line.
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown field", "listen: :53\nbogus: 1\n", []string{"test.yaml:2: bogus: unknown field"}},
		{"bad listen", "listen: nowhere\n", []string{"test.yaml:1: listen: want ip:port"}},
		{"udp size", "udp_size: 100\n", []string{"test.yaml:1: udp_size: must be 512..4096"}},
		{"tls needed", "dot_listen: 127.0.0.1:853\n", []string{"tls: cert and key are required"}},
		{"bad record", "zones:\n  - origin: a.test.\n    records:\n      - 'www A 192.0.2.1'\n      - 'www A not-an-ip'\n",
			[]string{"test.yaml:5: zones[0].records[1]:"}},
		{"unsupported type", "zones:\n  - origin: a.test.\n    records:\n      - 'x 300 IN DNAME b.test.'\n",
			[]string{"test.yaml:4: zones[0].records[0]: type DNAME not supported"}},
		{"outside the zone", "zones:\n  - origin: a.test.\n    records:\n      - 'www.b.test. A 192.0.2.1'\n",
			[]string{"zones[0].records[0]: www.b.test. is outside the zone a.test."}},
		{"CNAME and data", "zones:\n  - origin: a.test.\n    records:\n      - 'x A 192.0.2.1'\n      - 'x CNAME y'\n",
			[]string{"test.yaml:5: zones[0].records[1]: conflicting record: CNAME at x.a.test., which has other data"}},
		{"TTL mismatch in a set", "zones:\n  - origin: a.test.\n    records:\n      - 'x 60 A 192.0.2.1'\n      - 'x 90 A 192.0.2.2'\n",
			[]string{"zones[0].records[1]: conflicting record: TTL 90 differs"}},
		{"two records on one line", "zones:\n  - origin: a.test.\n    records:\n      - \"x A 192.0.2.1\\ny A 192.0.2.2\"\n",
			[]string{"zones[0].records[0]: one record per line"}},
		{"bad soa", "zones:\n  - origin: a.test.\n    soa: nonsense\n", []string{"test.yaml:3: zones[0].soa:"}},
		{"duplicate zone", "zones:\n  - origin: a.test.\n  - origin: A.test\n", []string{"zones[1].origin: zone a.test. listed twice"}},
		{"access errors", `zones:
  - origin: a.test.
    records: ["api A 192.0.2.1"]
    access:
      - name: api
        nodes:
          - addr: 10.0.0.1
            check: ftp://x
          - addr: nope
      - name: empty
`, []string{
			"zones[0].access[0].nodes[0].check: scheme must be tcp or http",
			"test.yaml:9: zones[0].access[0].nodes[1].addr: want an IP address",
			"test.yaml:10: zones[0].access[1].nodes: at least one node is required",
		}},
		{"access conflicts with A", "zones:\n  - origin: a.test.\n    records: ['api A 192.0.2.1']\n    access:\n      - name: api\n        nodes: [{addr: 10.0.0.1}]\n",
			[]string{"zones[0].access[0].name: conflicting record: access domain api.a.test. also has A"}},
		{"region table", "regions:\n  - cidr: 10.0.0.0/33\n    region: x\n  - cidr: 10.0.0.0/8\n",
			[]string{"test.yaml:2: regions[0].cidr: want a CIDR", "regions[1].region: required"}},
		{"health timeout above interval", "health:\n  interval: 1s\n  timeout: 2s\n", []string{"test.yaml:3: health.timeout: must not exceed interval"}},
		{"rrl", "rrl:\n  slip: 11\n  ipv4_prefix: 40\n", []string{"rrl.slip: must be 1..10", "rrl.ipv4_prefix: must be 1..32"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cfg Config
			err := config.Parse([]byte(c.yaml), "test.yaml", &cfg)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigZeroValueWorks(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Listen: "127.0.0.1:0"}, Options{Registerer: nilRegistry(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config()
	if c.UDPSize != DefaultUDPSize || c.Amplification != DefaultAmplification || c.MaxAnswerBytes != DefaultMaxAnswerBytes ||
		c.Health.Interval != DefaultHealthInterval || c.RRL.Slip != DefaultSlip || c.DoHPath != DefaultDoHPath {
		t.Errorf("defaults not applied: %+v", c)
	}
	s.Close()
}

func TestApplyRejectsListenerChange(t *testing.T) {
	s := startServer(t, parseConfig(t, testZone), Options{})
	cfg := parseConfig(t, testZone)
	cfg.Listen = "127.0.0.1:5353"
	cfg.DoHPath = "/other"
	err := s.Apply(cfg)
	if !errors.Is(err, ErrFixed) || !strings.Contains(err.Error(), "listen:") || !strings.Contains(err.Error(), "doh_path:") {
		t.Fatalf("Apply = %v, want ErrFixed naming listen and doh_path", err)
	}
}
