package async

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// OtherTenant is the tenant label of every tenant outside the top N.
const OtherTenant = "other"

// topTenants names the N busiest tenants for the metrics' tenant label and
// folds every other tenant into "other", so that a metric carries at most
// N+1 tenant values however many tenants submit (the one bounded form the
// metric lint allows: obs.BoundedLabels).
//
// It counts submissions per tenant in a space-saving sketch of 8N
// counters (bounded memory: a new tenant replaces the smallest counter and
// inherits its count, so a heavy tenant is never missed). Every rerank
// observations the top N counters become the labelled set, the counts are
// halved (recent traffic weighs more), and the series of tenants that left
// the set are deleted from the registered vectors before any new tenant is
// given a label.
type topTenants struct {
	n      int
	rerank int
	mu     sync.Mutex
	counts map[string]uint64
	named  map[string]bool
	seen   int
	vecs   []deleter
}

type deleter interface {
	DeletePartialMatch(prometheus.Labels) int
}

func newTopTenants(n int, vecs ...deleter) *topTenants {
	return &topTenants{n: n, rerank: max(100, 50*n), counts: map[string]uint64{}, named: map[string]bool{}, vecs: vecs}
}

// observe counts one submission of tenant and calls f with its label,
// under the lock, so that no series is recreated after rank deleted it.
func (t *topTenants) observe(tenant string, f func(label string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.counts[tenant]; ok || len(t.counts) < 8*t.n {
		t.counts[tenant]++
	} else {
		low, lowN := "", uint64(0)
		for k, c := range t.counts {
			if low == "" || c < lowN {
				low, lowN = k, c
			}
		}
		delete(t.counts, low)
		t.counts[tenant] = lowN + 1
	}
	if t.seen++; t.seen >= t.rerank || len(t.named) < t.n && !t.named[tenant] {
		t.rank()
	}
	f(t.labelLocked(tenant))
}

// use calls f with tenant's label without counting, under the lock.
func (t *topTenants) use(tenant string, f func(label string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t.labelLocked(tenant))
}

func (t *topTenants) labelLocked(tenant string) string {
	if t.named[tenant] {
		return tenant
	}
	return OtherTenant
}

// rank makes the top n counters the named set. Only a full rerank halves
// the counts; filling free places (fewer than n named) does not.
func (t *topTenants) rank() {
	full := t.seen >= t.rerank
	keys := make([]string, 0, len(t.counts))
	for k := range t.counts {
		if k != OtherTenant { // a tenant called "other" stays in "other"
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := t.counts[b]; t.counts[a] != c {
			if t.counts[a] > c {
				return -1
			}
			return 1
		}
		if t.named[a] != t.named[b] { // ties keep the named ones
			if t.named[a] {
				return -1
			}
			return 1
		}
		return 0
	})
	top := map[string]bool{}
	for _, k := range keys[:min(t.n, len(keys))] {
		top[k] = true
	}
	for k := range t.named {
		if !top[k] {
			for _, v := range t.vecs {
				v.DeletePartialMatch(prometheus.Labels{"tenant": k})
			}
		}
	}
	t.named = top
	if full {
		t.seen = 0
		for k, c := range t.counts {
			if c /= 2; c == 0 {
				delete(t.counts, k)
			} else {
				t.counts[k] = c
			}
		}
	}
}
