package retry

import (
	"errors"
	"sync"
	"time"

	"github.com/veerhq/veer/config"
)

// BudgetConfig tunes a Budget. The zero value works.
type BudgetConfig struct {
	// Ratio is the largest share of retries relative to requests; default
	// 0.2.
	Ratio float64 `yaml:"ratio" json:"ratio"`
	// MinRetries are always allowed per Interval, so a quiet client can
	// still retry; default 3.
	MinRetries int `yaml:"min_retries" json:"min_retries"`
	// Interval is the rolling window; default 10s.
	Interval time.Duration `yaml:"interval" json:"interval"`
}

// Validate reports invalid fields.
func (c *BudgetConfig) Validate() error {
	var errs []error
	if !(c.Ratio >= 0 && c.Ratio <= 10) {
		errs = append(errs, config.Field("ratio", "must be in [0, 10], got %v", c.Ratio))
	}
	if c.MinRetries < 0 {
		errs = append(errs, config.Field("min_retries", "must not be negative"))
	}
	if c.Interval < 0 {
		errs = append(errs, config.Field("interval", "must not be negative"))
	}
	return errors.Join(errs...)
}

const budgetBuckets = 10

// Budget limits retries to a share of requests over a rolling window. One
// Budget is shared by every call to one upstream. Safe for concurrent use.
type Budget struct {
	ratio float64
	min   int64
	width int64
	base  time.Time

	mu  sync.Mutex
	cur int64
	req [budgetBuckets]int64
	ret [budgetBuckets]int64
	sr  int64 // requests in window
	st  int64 // retries in window
}

// NewBudget returns a Budget; invalid values are replaced by defaults.
func NewBudget(c BudgetConfig) *Budget {
	if c.Validate() != nil {
		c = BudgetConfig{}
	}
	if c.Ratio == 0 {
		c.Ratio = 0.2
	}
	if c.MinRetries == 0 {
		c.MinRetries = 3
	}
	if c.Interval <= 0 {
		c.Interval = 10 * time.Second
	}
	return &Budget{ratio: c.Ratio, min: int64(c.MinRetries), width: int64(c.Interval) / budgetBuckets}
}

func (b *Budget) advance(now time.Time) {
	if b.base.IsZero() {
		b.base = now
	}
	e := int64(now.Sub(b.base)) / b.width
	if e <= b.cur {
		return
	}
	if e-b.cur >= budgetBuckets {
		b.req, b.ret = [budgetBuckets]int64{}, [budgetBuckets]int64{}
		b.sr, b.st = 0, 0
	} else {
		for i := b.cur + 1; i <= e; i++ {
			j := i % budgetBuckets
			b.sr -= b.req[j]
			b.st -= b.ret[j]
			b.req[j], b.ret[j] = 0, 0
		}
	}
	b.cur = e
}

// RequestAt counts one logical request (not its retries).
func (b *Budget) RequestAt(now time.Time) {
	b.mu.Lock()
	b.advance(now)
	b.req[b.cur%budgetBuckets]++
	b.sr++
	b.mu.Unlock()
}

// TryRetryAt takes one retry from the budget, reporting false when the
// window already holds max(MinRetries, Ratio·requests) retries.
func (b *Budget) TryRetryAt(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	limit := int64(b.ratio * float64(b.sr))
	if limit < b.min {
		limit = b.min
	}
	if b.st >= limit {
		return false
	}
	b.ret[b.cur%budgetBuckets]++
	b.st++
	return true
}
