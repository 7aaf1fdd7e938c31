package retry

import (
	"context"
	"time"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/outcome"
)

// Transient is the seed's rule for Redis and HTTP client calls: retry up to
// Retries times, sleeping Sleep between tries, only when the error is a
// dropped connection (EOF, reset) or an i/o timeout. The zero value works.
type Transient struct {
	// Retries after the first try; default 3.
	Retries int `yaml:"retries" json:"retries"`
	// Sleep between tries; default 100ms.
	Sleep time.Duration `yaml:"sleep" json:"sleep"`
	// Clock for the sleeps; default clock.Real.
	Clock clock.Clock `yaml:"-" json:"-"`
}

// IsTransient reports whether err is an EOF, a reset connection or an i/o
// timeout (outcome kinds ConnectionReset, ResponseTimeout, ConnectTimeout).
func IsTransient(err error) bool {
	switch outcome.ClassifyError(err) {
	case outcome.ConnectionReset, outcome.ResponseTimeout, outcome.ConnectTimeout:
		return true
	}
	return false
}

// Do calls fn until it returns nil, a non-transient error, or the retries
// are spent; it returns fn's last error, or ctx's error if ctx ends first.
func (t Transient) Do(ctx context.Context, fn func(context.Context) error) error {
	retries, sleep := t.Retries, t.Sleep
	if retries <= 0 {
		retries = 3
	}
	if sleep <= 0 {
		sleep = 100 * time.Millisecond
	}
	for i := 0; ; i++ {
		err := fn(ctx)
		if err == nil || i >= retries || !IsTransient(err) || ctx.Err() != nil {
			return err
		}
		if serr := Sleep(ctx, t.Clock, sleep); serr != nil {
			return err
		}
	}
}
