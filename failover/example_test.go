package failover_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/failover"
	"github.com/veerhq/veer/obs"
	"github.com/veerhq/veer/outcome"
)

func hello(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", name)
	})
}

func fetch(c *http.Client, url string) string {
	resp, err := c.Get(url)
	if err != nil {
		return "network error"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A client keeps working when its primary domain goes away: after three
// connection failures the Transport probes the backup with a canary and
// moves traffic there. (Domains here are loopback host:port pairs; in an app
// they are names such as api.example.com.)
func Example() {
	primary := httptest.NewServer(hello("primary"))
	backup := httptest.NewServer(hello("backup"))
	defer backup.Close()

	moves := make(chan failover.Event, 8)
	t, err := failover.NewTransport(failover.Config{
		Primary:      primary.Listener.Addr().String(),
		Backups:      []string{backup.Listener.Addr().String()},
		Registerer:   prometheus.NewRegistry(),
		Logger:       obs.Discard,
		OnTransition: func(e failover.Event) { moves <- e },
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer t.Close()
	client := &http.Client{Transport: t}
	url := primary.URL + "/hello"

	fmt.Println(fetch(client, url))
	primary.Close()
	// A refused connection is an answer from the network: with the
	// default policy one is enough to start FAILOVER; the backup's canary
	// answers, the primary's (refused too) confirms.
	fmt.Println(fetch(client, url))
	for range 2 {
		e := <-moves
		fmt.Println(e.From, "->", e.To, "because", e.Reason)
	}
	fmt.Println(t.State(), fetch(client, url))
	// Output:
	// hello from primary
	// network error
	// primary -> failover because answered_failure
	// failover -> backup because canary_success
	// backup hello from backup
}

// The policies are pure state machines: the caller passes the time and the
// outcomes, and the policy says which domain to use, which canary to send
// and when to call Tick. The simulator drives them this way.
func ExampleUber() {
	p, err := failover.NewUber(failover.Config{
		Primary: "api.example.com",
		Backups: []string{"dc1.example.com"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p.Start(now, failover.None)
	refused := outcome.Of(outcome.ConnectRefused)
	for range 3 {
		a := p.Report(now, p.Domain(), refused)
		if a.Canary != failover.None {
			fmt.Println(p.State(), "canary to", a.Canary)
			a = p.CanaryDone(now, a.Canary, outcome.Of(outcome.Success))
			fmt.Println(p.State(), "on", p.Domain(), "until", a.Wake.Sub(now))
		}
	}
	a := p.Tick(now.Add(10 * time.Second))
	fmt.Println(p.State(), "canary to", a.Canary)
	p.CanaryDone(now.Add(11*time.Second), 0, outcome.Of(outcome.Success))
	fmt.Println(p.State(), "on", p.Domain())
	// Output:
	// failover canary to 1
	// backup on 1 until 10s
	// recovery canary to 0
	// primary on 0
}
