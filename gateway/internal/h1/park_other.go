//go:build !unix

package h1

import (
	"errors"
	"net"
	"time"
)

// parkSupported: without MSG_PEEK, idle connections stay with net/http.
const parkSupported = false

func waitReadable(net.Conn, time.Time) error { return errors.ErrUnsupported }
