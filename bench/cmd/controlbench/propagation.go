package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/veerhq/veer/control"
	"github.com/veerhq/veer/control/controltest"
	"github.com/veerhq/veer/store"
	"github.com/veerhq/veer/store/storeetcd"
	"github.com/veerhq/veer/store/storeetcd/etcdtest"
)

func listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// seen records, per consumer, when it first saw each revision.
type seen struct {
	mu   sync.Mutex
	at   map[int]map[int64]time.Time // consumer -> revision -> time
	cond *sync.Cond
}

func (s *seen) mark(consumer int, rev int64) {
	s.mu.Lock()
	if s.at[consumer] == nil {
		s.at[consumer] = map[int64]time.Time{}
	}
	if _, ok := s.at[consumer][rev]; !ok {
		s.at[consumer][rev] = time.Now()
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

// waitAll returns when every consumer saw a revision >= rev, and the
// latest first-seen time among them.
func (s *seen) waitAll(consumers int, rev int64) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		var last time.Time
		all := true
		for c := range consumers {
			var first time.Time
			for r, t := range s.at[c] {
				if r >= rev && (first.IsZero() || t.Before(first)) {
					first = t
				}
			}
			if first.IsZero() {
				all = false
				break
			}
			if first.After(last) {
				last = first
			}
		}
		if all {
			return last
		}
		s.cond.Wait()
	}
}

func propagation(changes int) error {
	dir, err := os.MkdirTemp("", "controlbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	etcd, err := etcdtest.Start(dir)
	if err != nil {
		return err
	}
	defer etcd.Kill()
	sn := &seen{at: map[int]map[int64]time.Time{}}
	sn.cond = sync.NewCond(&sn.mu)
	local := mustAddr("127.0.0.1")
	var admins []string
	for i := range 3 {
		svc, err := control.New(control.Config{DataDir: filepath.Join(dir, fmt.Sprint("i", i)), Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
			Etcd: storeetcd.Config{Endpoints: []string{etcd.URL}}, SigningKeyFile: filepath.Join(dir, "routing.key"),
			AdminTokenFile: filepath.Join(dir, "admin.token")}, control.Options{Logger: quiet()})
		if err != nil {
			return err
		}
		// A consumer "has" a revision when its routing answer reflects it.
		svc.SetOnApply(func(rev int64, s *control.Snapshot) {
			if s != nil && strings.HasPrefix(s.Decide(local, "d1", "").Rule, "emergency") {
				sn.mark(i, rev)
			}
		})
		a, err := svc.Start()
		if err != nil {
			return err
		}
		defer svc.Close()
		admins = append(admins, "http://"+a.Admin)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for g := range 2 { // two gateways following the store
		st, err := storeetcd.New(storeetcd.Config{Endpoints: []string{etcd.URL}}, storeetcd.Options{})
		if err != nil {
			return err
		}
		defer st.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			store.Follow(ctx, st, "routing/", store.FollowOptions{}, func(s *store.Snapshot) {
				if _, ok := s.Docs[control.KeyEmergency]; ok {
					sn.mark(3+g, s.Revision)
				}
			})
		}()
	}
	tok, _ := os.ReadFile(filepath.Join(dir, "admin.token"))
	call := func(url string, body []byte) (int64, error) {
		req, _ := http.NewRequest("PUT", url, bytes.NewReader(body))
		if strings.Contains(url, "playbook") {
			req.Method = "POST"
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("%s: %s %s", url, resp.Status, b)
		}
		var d struct{ Revision int64 }
		return d.Revision, json.Unmarshal(b, &d)
	}
	if err := putBigTable(admins[0], strings.TrimSpace(string(tok))); err != nil {
		return err
	}
	var lat []time.Duration
	for i := -1; i < changes; i++ { // i = -1: warm-up (every instance has compiled the table), not timed
		body := fmt.Sprintf(`{"action":"emergency_set","override":{"primary":"e%d.example.com"},"reason":"bench"}`, i)
		t0 := time.Now()
		rev, err := call(admins[(i+3)%3]+"/v1/admin/playbook", []byte(body))
		if err != nil {
			return err
		}
		if d := sn.waitAll(5, rev).Sub(t0); i >= 0 {
			lat = append(lat, d)
		}
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("# controlbench -mode propagation: %d overrides, each through instance i%%3 of 3 (etcd %s), consumers = 3 instances' routing answers + 2 store watchers; shared 2-core machine\n", changes, etcd.URL)
	fmt.Printf("write start -> last consumer has it: p50 %v, p90 %v, p99 %v, max %v\n",
		q(0.5).Round(time.Microsecond), q(0.9).Round(time.Microsecond), q(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	return nil
}

// putBigTable writes controltest.BigTable through the admin API: the 50
// whitelist documents, then the table.
func putBigTable(admin, token string) error {
	t, lists := controltest.BigTable()
	put := func(key string, v any) error {
		b, _ := json.Marshal(v)
		req, _ := http.NewRequest("PUT", admin+"/v1/admin/docs/"+key, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("PUT %s: %s %s", key, resp.Status, body)
		}
		return nil
	}
	for name, l := range lists {
		if err := put(control.KeyWhitelists+name, l); err != nil {
			return err
		}
	}
	return put(control.KeyTable, t)
}
