package lastmile

import (
	"crypto/tls"

	"github.com/veerhq/veer/lastmile/lmtest"
)

func tlsConfig(ca *lmtest.CA) *tls.Config { return &tls.Config{RootCAs: ca.Pool()} }
