package gateway

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

func TestTracePropagation(t *testing.T) {
	var got http.Header
	a := upstream(t, func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() })
	_, base := startGateway(t, fill("routes: [{name: r, clusters: [{name: a}]}]\nclusters: [{name: a, backends: [{address: A}]}]\n", "A", a))
	cl := &http.Client{}
	in := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	get(t, cl, base+"/", "Traceparent", in, "Tracestate", "vendor=x")
	out := got.Get("Traceparent")
	if !strings.HasPrefix(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || !strings.HasSuffix(out, "-01") || out == in {
		t.Errorf("traceparent %q: want the caller's trace id and flags with a new parent id", out)
	}
	if got.Get("Tracestate") != "vendor=x" {
		t.Errorf("tracestate %q, want passed through", got.Get("Tracestate"))
	}
	get(t, cl, base+"/", "Traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "Tracestate", "vendor=x")
	if _, _, ok := parseTraceparent(got.Get("Traceparent")); !ok || strings.Contains(got.Get("Traceparent"), "0000000000000000000000000000000") {
		t.Errorf("invalid traceparent: forwarded %q, want a new valid trace", got.Get("Traceparent"))
	}
	if got.Get("Tracestate") != "" {
		t.Errorf("tracestate kept with an invalid traceparent")
	}
}

func FuzzTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		id, flags, ok := parseTraceparent(v)
		if ok && (len(id) != 32 || len(flags) != 2 || !strings.Contains(v, id)) {
			t.Fatalf("%q parsed as %q %q", v, id, flags)
		}
		in, _ := http.NewRequest("GET", "http://x/", nil)
		in.Header.Set("Traceparent", v)
		out := in.Clone(in.Context())
		got := propagateTrace(in, out, rand.New(rand.NewPCG(1, 2)), false).traceID
		id2, _, ok2 := parseTraceparent(out.Header.Get("Traceparent"))
		if !ok2 || id2 != got || (ok && got != id) {
			t.Fatalf("%q: forwarded %q (trace %q)", v, out.Header.Get("Traceparent"), got)
		}
	})
}
