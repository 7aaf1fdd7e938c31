// Package watch hot-reloads a config file: it watches the file's directory
// (so an atomic rename-and-replace or a Kubernetes ConfigMap symlink swap is
// seen), parses each new version with config.Parse (strict, validated) and
// hands it to an apply function, typically a library's Apply method:
//
//	w, err := watch.File(path, watch.Options{}, shedder.Apply)
//
// A version that does not parse, does not validate, or that apply refuses
// (a field that cannot change at run time, say) is a rejected reload: the
// previous config stays in force, the error is logged as
// "file:line: field: why", and veer_config_reloads_total{result="invalid"}
// counts it. A file that cannot be read or is empty (half of an in-place
// save) counts as result="unreadable" and also keeps the old config.
//
// This package carries the heavy parts of configuration (fsnotify, the
// Prometheus counter); the config package itself stays dependency-free so a
// library that only validates its config does not pull them in.
//
// Failure mode: the first load must succeed (File returns its error); later
// failures are logged and counted, never fatal.
package watch

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veerhq/veer/clock"
	"github.com/veerhq/veer/config"
	"github.com/veerhq/veer/obs"
)

// DefaultDebounce is Options.Debounce's default.
const DefaultDebounce = 100 * time.Millisecond

// Options are the run-time wiring of a Watcher. The zero value works.
type Options struct {
	// Name labels the metrics and logs; default: the file's base name.
	Name string
	// Logger receives reload results; default slog.Default().
	Logger *slog.Logger
	// Registerer receives the reload metrics; default
	// prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// Debounce groups the bursts of events one save makes; default
	// DefaultDebounce.
	Debounce time.Duration
	// Clock schedules the debounce; default clock.Real.
	Clock clock.Clock
}

// ErrEmpty is the error of a reload that found an empty file.
var ErrEmpty = errors.New("watch: config file is empty")

// Watcher keeps the latest accepted config of one file.
type Watcher[T any] struct {
	path    string
	name    string
	opts    Options
	log     *slog.Logger
	apply   func(T) error
	fsw     *fsnotify.Watcher
	cur     atomic.Pointer[T]
	reloads *prometheus.CounterVec

	mu      sync.Mutex // serialises reloads and apply
	last    []byte     // the content last parsed
	lastErr error      // and why it was rejected, if it was
	pending clock.Timer
	done    chan struct{}
	wg      sync.WaitGroup
}

// File loads path into a new T (config.Parse: strict, validated), calls
// apply with it, and from then on reloads the file whenever it changes,
// calling apply with each new valid config. A version that fails to parse or
// validate, or that apply returns an error for, is rejected: logged with its
// file and line, counted, and the previous config stays in force. The
// initial load must succeed, apply included.
//
// apply runs on the watcher's goroutine, one call at a time; it may be nil
// when the caller only reads Current.
func File[T any](path string, opts Options, apply func(T) error) (*Watcher[T], error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := config.NotNegative("debounce", opts.Debounce); err != nil {
		return nil, err
	}
	if opts.Debounce == 0 {
		opts.Debounce = DefaultDebounce
	}
	opts.Clock = clock.Or(opts.Clock)
	w := &Watcher[T]{
		path:  abs,
		name:  opts.Name,
		opts:  opts,
		log:   obs.LoggerOr(opts.Logger),
		apply: apply,
		done:  make(chan struct{}),
	}
	if w.name == "" {
		w.name = filepath.Base(abs)
	}
	w.reloads = obs.Register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "veer_config_reloads_total",
		Help: "Config file reloads by config name and result (ok, invalid, unreadable).",
	}, []string{"config", "result"}))
	for _, r := range []string{"ok", "invalid", "unreadable"} {
		w.reloads.WithLabelValues(w.name, r)
	}
	// Watch the directory before the first read, so that a change made
	// between the read and the watch's start is not missed (at worst it is
	// read twice).
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := fsw.Add(filepath.Dir(abs)); err != nil {
		fsw.Close()
		return nil, err
	}
	if err := w.reload(true); err != nil {
		fsw.Close()
		return nil, err
	}
	w.fsw = fsw
	w.wg.Add(1)
	go w.loop()
	return w, nil
}

// Current returns the config in force (the last one apply accepted). It
// never returns nil.
func (w *Watcher[T]) Current() *T { return w.cur.Load() }

// Reload re-reads the file now (e.g. on SIGHUP). It returns the error that
// keeps the old config in force (also when the file is unchanged since a
// rejected version), or nil.
func (w *Watcher[T]) Reload() error { return w.reload(false) }

// Close stops watching. It is safe to call more than once.
func (w *Watcher[T]) Close() error {
	w.mu.Lock()
	select {
	case <-w.done:
		w.mu.Unlock()
		return nil
	default:
	}
	close(w.done)
	if w.pending != nil {
		w.pending.Stop()
	}
	w.mu.Unlock()
	err := w.fsw.Close()
	w.wg.Wait()
	return err
}

func (w *Watcher[T]) loop() {
	defer w.wg.Done()
	for {
		select {
		case _, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			// Any event in the directory may concern our file: a rename onto
			// it, a symlink swap of a parent entry (Kubernetes ..data), a
			// write. reload() compares contents, so extra events are cheap.
			w.schedule()
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.log.Warn("config watch error", "config", w.name, "err", err)
		case <-w.done:
			return
		}
	}
}

func (w *Watcher[T]) schedule() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.done:
		return
	default:
	}
	if w.pending != nil {
		w.pending.Reset(w.opts.Debounce)
		return
	}
	w.pending = w.opts.Clock.AfterFunc(w.opts.Debounce, func() { _ = w.reload(false) })
}

func (w *Watcher[T]) reload(initial bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := config.ReadFile(w.path)
	if err != nil {
		if initial {
			return err
		}
		// A rename-and-replace briefly removes the file; the event for the
		// new file follows. Keep the old config.
		w.reloads.WithLabelValues(w.name, "unreadable").Inc()
		w.log.Warn("config reload failed; keeping the previous config", "config", w.name, "path", w.path, "err", err)
		return err
	}
	if !initial && bytes.Equal(data, w.last) {
		return w.lastErr
	}
	if !initial && len(bytes.TrimSpace(data)) == 0 {
		// An in-place write truncates before it writes: an empty file seen
		// on reload is almost always half a save, not a wish for defaults.
		w.reloads.WithLabelValues(w.name, "unreadable").Inc()
		w.log.Warn("config file is empty; keeping the previous config", "config", w.name, "path", w.path)
		return ErrEmpty
	}
	v := new(T)
	err = config.Parse(data, w.path, v)
	if err == nil && w.apply != nil {
		err = config.Locate(w.apply(*v), w.path, data)
	}
	if err != nil {
		if initial {
			return err
		}
		w.last, w.lastErr = data, err
		w.reloads.WithLabelValues(w.name, "invalid").Inc()
		w.log.Error("config reload rejected; keeping the previous config", "config", w.name, "path", w.path, "err", err)
		return err
	}
	w.last, w.lastErr = data, nil
	w.cur.Store(v)
	if !initial {
		w.reloads.WithLabelValues(w.name, "ok").Inc()
		w.log.Info("config reloaded", "config", w.name, "path", w.path)
	}
	return nil
}
