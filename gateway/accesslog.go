package gateway

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/config"
)

// logEntry is one access log line.
type logEntry struct {
	time                      time.Time
	method, host, path, proto string
	remote, route, cluster    string
	backend, traceID          string
	status, attempts          int
	bytes                     int64
	dur                       time.Duration
	stale                     bool
}

// accessLog writes entries as slog JSON on a bounded pool of workers. The
// request path only does a non-blocking send: when the queue is full the
// entry is dropped and counted (veer_gateway_access_log_dropped_total).
type accessLog struct {
	ch      chan logEntry
	log     *slog.Logger
	dropped prometheus.Counter
	closer  io.Closer
	wg      sync.WaitGroup
	once    sync.Once
}

func newAccessLog(c AccessLog, dropped prometheus.Counter) (*accessLog, error) {
	var w io.Writer
	var closer io.Closer
	switch c.Path {
	case "":
		return nil, nil
	case "stdout":
		w = os.Stdout
	case "stderr":
		w = os.Stderr
	default:
		f, err := os.OpenFile(c.Path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, config.Field("path", "%v", err)
		}
		w, closer = f, f
	}
	return startAccessLog(w, closer, c.Queue, c.Workers, dropped), nil
}

func startAccessLog(w io.Writer, closer io.Closer, queue, workers int, dropped prometheus.Counter) *accessLog {
	a := &accessLog{ch: make(chan logEntry, queue), log: slog.New(slog.NewJSONHandler(w, nil)), dropped: dropped, closer: closer}
	for range workers {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for e := range a.ch {
				a.write(e)
			}
		}()
	}
	return a
}

// submit never blocks.
func (a *accessLog) submit(e logEntry) {
	select {
	case a.ch <- e:
	default:
		a.dropped.Inc()
	}
}

func (a *accessLog) write(e logEntry) {
	a.log.LogAttrs(context.Background(), slog.LevelInfo, "access",
		slog.Time("start", e.time), slog.String("method", e.method), slog.String("host", e.host),
		slog.String("path", e.path), slog.String("proto", e.proto), slog.String("remote", e.remote),
		slog.Int("status", e.status), slog.Int64("bytes", e.bytes), slog.Duration("duration", e.dur),
		slog.String("route", e.route), slog.String("cluster", e.cluster), slog.String("backend", e.backend),
		slog.Int("attempts", e.attempts), slog.Bool("stale", e.stale), slog.String("trace_id", e.traceID))
}

// close stops accepting entries, writes those queued, and closes the file.
// submit must not be called after close.
func (a *accessLog) close() {
	if a == nil {
		return
	}
	a.once.Do(func() {
		close(a.ch)
		a.wg.Wait()
		if a.closer != nil {
			_ = a.closer.Close()
		}
	})
}
