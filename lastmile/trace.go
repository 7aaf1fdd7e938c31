package lastmile

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/veerhq/veer/outcome"
)

// RouteStep names a step of the route chain (Config.Steps): how a
// request's host is reached. The values are bounded and used as metric
// labels.
type RouteStep string

// Route steps and the route-reuse pseudo step.
const (
	StepRoute      RouteStep = "route"       // a working route from an earlier request
	StepScheduler  RouteStep = "scheduler"   // access nodes from the scheduling service
	StepDirect     RouteStep = "direct"      // the request's host through the resolver chain
	StepCDN        RouteStep = "cdn"         // a CDN vendor domain
	StepFallbackIP RouteStep = "fallback_ip" // a configured load-balancer address
)

// ResolverStep names a step of the resolver chain (DNSConfig.Order): how a
// name became addresses. The values are bounded and used as metric labels.
type ResolverStep string

// Resolver steps and the cache pseudo steps.
const (
	StepSystem      ResolverStep = "system"       // the system (or injected) *net.Resolver
	StepPrivateUDP  ResolverStep = "private_udp"  // private DNS over UDP
	StepPrivateRace ResolverStep = "private_race" // private DNS, UDP and TCP raced
	StepDoH         ResolverStep = "doh"          // DNS over HTTPS, RFC 8484
	StepBootstrap   ResolverStep = "bootstrap"    // addresses from config
	StepCache       ResolverStep = "cache"        // a fresh cached answer
	StepStale       ResolverStep = "stale"        // a stale cached answer (RFC 8767)
)

// Protocol names one attempt of the protocol race to a node.
type Protocol string

// The race's protocol attempts.
const (
	ProtocolH3  Protocol = "h3"  // HTTP/3 over QUIC
	ProtocolTCP Protocol = "tcp" // TLS over TCP, then HTTP/2 or HTTP/1.1
)

// Failure is one failed step: what was tried, how it failed and why.
// Exactly one of Route, Resolver and Protocol is set.
type Failure struct {
	// Route is the route step that failed, if a route step did.
	Route RouteStep
	// Resolver is the resolver step that failed, if a resolver step did.
	Resolver ResolverStep
	// Protocol is the protocol attempt that failed, if one did.
	Protocol Protocol
	// Target is what the step was trying: a name, an address, a URL.
	Target string
	// Kind is the classified failure.
	Kind outcome.Kind
	// Err is the cause.
	Err error
}

// Step returns the name of the step that failed, whichever kind it is.
func (f Failure) Step() string { return stepName(f.Route, f.Resolver, f.Protocol) }

func stepName(r RouteStep, s ResolverStep, p Protocol) string {
	switch {
	case p != "":
		return string(p)
	case s != "":
		return string(s)
	}
	return string(r)
}

func (f Failure) String() string {
	return fmt.Sprintf("%s %s: %s: %v", f.Step(), f.Target, f.Kind, f.Err)
}

// Skip is a candidate the chain passed over without trying it: not a
// failure (nothing was sent, nothing failed on this request). Exactly one of
// Route and Resolver is set.
type Skip struct {
	// Route is the route step whose node was skipped (every protocol to it
	// remembered broken: Reason wraps ErrSkippedBroken).
	Route RouteStep
	// Resolver is the resolver step skipped (every server it would ask
	// remembered dead: Reason wraps ErrDeadResolver).
	Resolver ResolverStep
	// Target is the candidate: an address or a name.
	Target string
	// Reason says why.
	Reason error
}

// Step returns the name of the skipped step.
func (s Skip) Step() string { return stepName(s.Route, s.Resolver, "") }

func (s Skip) String() string {
	return fmt.Sprintf("%s %s: skipped: %v", s.Step(), s.Target, s.Reason)
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
	Served RouteStep
	// Resolver is the resolver step that produced the address, if any.
	Resolver ResolverStep
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

func (t *Trace) setResolver(s ResolverStep) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.Resolver = s
	t.mu.Unlock()
}

// FailedSteps returns the names of the failed steps (Failure.Step), in
// order.
func (t *Trace) FailedSteps() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, len(t.Failures))
	for i, f := range t.Failures {
		out[i] = f.Step()
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
		fmt.Fprintf(&b, " [%s %s %s]", f.Step(), f.Target, f.Kind)
	}
	for _, s := range t.Skipped {
		why := "remembered_broken"
		if s.Resolver != "" {
			why = "remembered_dead"
		}
		fmt.Fprintf(&b, " skipped[%s %s %s]", s.Step(), s.Target, why)
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
