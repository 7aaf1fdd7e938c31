package asyncnats

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startEmbedded starts an in-process nats-server with JetStream storing in
// dir, syncing every write to disk (the Go form of sync_interval: always),
// reachable only in-process (no listener).
func startEmbedded(dir string, log *slog.Logger) (*server.Server, error) {
	if dir == "" {
		return nil, errors.New("asyncnats: the embedded engine needs a store directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("asyncnats: store directory: %w", err)
	}
	opts := &server.Options{
		ServerName:         "veer-async",
		JetStream:          true,
		StoreDir:           abs,
		DontListen:         true,
		NoSigs:             true,
		NoLog:              true,
		SyncAlways:         true,
		JetStreamMaxMemory: 64 << 20,
		MaxPayload:         8 << 20, // a 1 MiB body with its headers, or a pack of them
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("asyncnats: embedded server: %w", err)
	}
	s.SetLoggerV2(&slogLogger{log: log}, false, false, false)
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("asyncnats: embedded server in %s not ready after 30s (corrupt store? see the log)", abs)
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		return nil, fmt.Errorf("asyncnats: JetStream failed to start on store %s (see the log)", abs)
	}
	return s, nil
}

// slogLogger sends the embedded server's log to slog.
type slogLogger struct{ log *slog.Logger }

func (l *slogLogger) Noticef(format string, v ...any) {
	l.log.Debug("nats: " + fmt.Sprintf(format, v...))
}
func (l *slogLogger) Warnf(format string, v ...any) {
	l.log.Warn("nats: " + fmt.Sprintf(format, v...))
}
func (l *slogLogger) Fatalf(format string, v ...any) {
	l.log.Error("nats: " + fmt.Sprintf(format, v...))
}
func (l *slogLogger) Errorf(format string, v ...any) {
	l.log.Error("nats: " + fmt.Sprintf(format, v...))
}
func (l *slogLogger) Debugf(format string, v ...any) {}
func (l *slogLogger) Tracef(format string, v ...any) {}
