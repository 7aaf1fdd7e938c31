package retry

import (
	"cmp"
	"errors"
	"sync"
	"time"

	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/internal/rolling"
)

// The defaults of a zero BudgetConfig field.
const (
	DefaultBudgetRatio      = 0.2
	DefaultBudgetMinRetries = 3
	DefaultBudgetInterval   = 10 * time.Second
	// MaxBudgetRatio bounds BudgetConfig.Ratio.
	MaxBudgetRatio = 10
	// MinBudgetInterval bounds BudgetConfig.Interval from below. A shorter
	// window cannot mean what it says (its ten buckets would be under
	// 100 ns wide; under 10 ns it once divided by zero): it is a unit
	// mistake in the file (10 for 10s), so it is refused.
	MinBudgetInterval = time.Microsecond
)

// BudgetConfig tunes a Budget: what a config file can say. The zero value
// works; a zero field takes its default, an invalid one is an error of
// NewBudget naming the field.
type BudgetConfig struct {
	// Ratio is the largest share of retries relative to requests, at most
	// MaxBudgetRatio; default DefaultBudgetRatio (0.2).
	Ratio float64 `yaml:"ratio" json:"ratio"`
	// MinRetries are always allowed per Interval, so a quiet client can
	// still retry; default DefaultBudgetMinRetries (3).
	MinRetries int `yaml:"min_retries" json:"min_retries"`
	// Interval is the rolling window, at least MinBudgetInterval; default
	// DefaultBudgetInterval (10s).
	Interval time.Duration `yaml:"interval" json:"interval"`
}

// withDefaults fills the zero fields of a valid BudgetConfig.
func (c BudgetConfig) withDefaults() BudgetConfig {
	c.Ratio = cmp.Or(c.Ratio, DefaultBudgetRatio)
	c.MinRetries = cmp.Or(c.MinRetries, DefaultBudgetMinRetries)
	c.Interval = cmp.Or(c.Interval, DefaultBudgetInterval)
	return c
}

// Validate reports invalid fields.
func (c *BudgetConfig) Validate() error {
	var errs []error
	if !(c.Ratio >= 0 && c.Ratio <= MaxBudgetRatio) {
		errs = append(errs, config.Field("ratio", "must be in [0, %d], got %v", MaxBudgetRatio, c.Ratio))
	}
	errs = append(errs, config.NotNegative("min_retries", c.MinRetries))
	if c.Interval < 0 || (c.Interval > 0 && c.Interval < MinBudgetInterval) {
		errs = append(errs, config.Field("interval", "must be 0 (default) or at least %v, got %v", MinBudgetInterval, c.Interval))
	}
	return errors.Join(errs...)
}

const budgetBuckets = 10

// Budget limits retries to a share of requests over a rolling window. One
// Budget is shared by every call to one upstream. Safe for concurrent use.
type Budget struct {
	ratio float64
	min   int64

	mu   sync.Mutex
	base time.Time      // the time of the first call: the window's origin
	win  rolling.Window // A = requests, B = retries
}

// NewBudget returns a Budget. An invalid c is an error naming the field (a
// *config.FieldError); a zero field takes its default.
func NewBudget(c BudgetConfig) (*Budget, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	return &Budget{ratio: c.Ratio, min: int64(c.MinRetries), win: rolling.New(c.Interval, budgetBuckets)}, nil
}

func (b *Budget) advance(now time.Time) {
	if b.base.IsZero() {
		b.base = now
	}
	b.win.Advance(int64(now.Sub(b.base)))
}

// RequestAt counts one logical request (not its retries).
func (b *Budget) RequestAt(now time.Time) {
	b.mu.Lock()
	b.advance(now)
	b.win.Add(1, 0)
	b.mu.Unlock()
}

// TryRetryAt takes one retry from the budget, reporting false when the
// window already holds max(MinRetries, Ratio·requests) retries.
func (b *Budget) TryRetryAt(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	sum := b.win.Sum()
	limit := max(int64(b.ratio*float64(sum.A)), b.min)
	if sum.B >= limit {
		return false
	}
	b.win.Add(0, 1)
	return true
}
