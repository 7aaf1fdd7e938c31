package lastmile

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/veerhq/veer/outcome"
)

// Step names one step of the resolver chain or of the route chain. The
// values are bounded and used as metric labels.
type Step string

// Route steps (Config.Steps) and the route-reuse pseudo step.
const (
	StepRoute      Step = "route"       // a working route from an earlier request
	StepScheduler  Step = "scheduler"   // access nodes from the scheduling service
	StepDirect     Step = "direct"      // the request's host through the resolver chain
	StepCDN        Step = "cdn"         // a CDN vendor domain
	StepFallbackIP Step = "fallback_ip" // a configured load-balancer address
)

// Resolver steps (DNSConfig.Order) and the cache pseudo steps.
const (
	StepSystem      Step = "system"       // the system (or injected) *net.Resolver
	StepPrivateUDP  Step = "private_udp"  // private DNS over UDP
	StepPrivateRace Step = "private_race" // private DNS, UDP and TCP raced
	StepDoH         Step = "doh"          // DNS over HTTPS, RFC 8484
	StepBootstrap   Step = "bootstrap"    // addresses from config
	StepCache       Step = "cache"        // a fresh cached answer
	StepStale       Step = "stale"        // a stale cached answer (RFC 8767)
)

// Protocol attempt steps of the race.
const (
	StepH3  Step = "h3"  // HTTP/3 over QUIC
	StepTCP Step = "tcp" // TLS over TCP, then HTTP/2 or HTTP/1.1
)

// Failure is one failed step: what was tried, how it failed and why.
type Failure struct {
	// Step is the step that failed (a route, resolver or protocol step).
	Step Step
	// Target is what the step was trying: a name, an address, a URL.
	Target string
	// Kind is the classified failure.
	Kind outcome.Kind
	// Err is the cause.
	Err error
}

func (f Failure) String() string {
	return fmt.Sprintf("%s %s: %s: %v", f.Step, f.Target, f.Kind, f.Err)
}

// Skip is a candidate the chain passed over without trying it: not a
// failure (nothing was sent, nothing failed on this request).
type Skip struct {
	// Step is the route step the candidate belonged to.
	Step Step
	// Target is the candidate's address.
	Target string
	// Reason says why (ErrSkippedBroken).
	Reason error
}

func (s Skip) String() string {
	return fmt.Sprintf("%s %s: skipped: %v", s.Step, s.Target, s.Reason)
}

// Trace records how one request was routed. Attach one with WithTrace before
// the request and read it after RoundTrip returned; the Transport fills it
// in. Its methods are safe for concurrent use (steps of a race record
// concurrently).
type Trace struct {
	mu sync.Mutex
	// Host is the host:port the request asked for.
	Host string
	// Served is the route step that carried the request (StepRoute when an
	// earlier route was reused), empty if none did.
	Served Step
	// Resolver is the resolver step that produced the address, if any.
	Resolver Step
	// Protocol is the negotiated protocol: "h3", "h2" or "http/1.1".
	Protocol string
	// Addr is the address the request was sent to.
	Addr string
	// ServerName is the TLS server name used.
	ServerName string
	// Failures lists every failed step in the order they were recorded.
	Failures []Failure
	// Skipped lists candidates passed over without an attempt (every
	// protocol remembered broken); such a candidate may still serve the
	// request on the chain's last pass, so a skip is not a failure.
	Skipped []Skip
	// Chain is how long route discovery took (zero when a route was reused).
	Chain time.Duration
}

func (t *Trace) fail(f Failure) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.Failures = append(t.Failures, f)
	t.mu.Unlock()
}

func (t *Trace) skip(s Skip) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.Skipped = append(t.Skipped, s)
	t.mu.Unlock()
}

func (t *Trace) setResolver(s Step) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.Resolver = s
	t.mu.Unlock()
}

// FailedSteps returns the steps of the recorded failures, in order.
func (t *Trace) FailedSteps() []Step {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Step, len(t.Failures))
	for i, f := range t.Failures {
		out[i] = f.Step
	}
	return out
}

// String is a one-line summary for logs and support tickets.
func (t *Trace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "host=%s served=%s", t.Host, t.Served)
	if t.Resolver != "" {
		fmt.Fprintf(&b, " resolver=%s", t.Resolver)
	}
	if t.Protocol != "" {
		fmt.Fprintf(&b, " proto=%s addr=%s sni=%s", t.Protocol, t.Addr, t.ServerName)
	}
	for _, f := range t.Failures {
		fmt.Fprintf(&b, " [%s %s %s]", f.Step, f.Target, f.Kind)
	}
	for _, s := range t.Skipped {
		fmt.Fprintf(&b, " skipped[%s %s remembered_broken]", s.Step, s.Target)
	}
	return b.String()
}

type traceKey struct{}

// WithTrace returns ctx carrying t; the Transport records into t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFrom returns the Trace attached to ctx, or nil.
func TraceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}
