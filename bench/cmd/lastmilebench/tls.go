package main

import (
	"crypto/tls"

	"github.com/veerhq/veer/lastmile/lmtest"
)

func lmtestTLS(ca *lmtest.CA) *tls.Config { return &tls.Config{RootCAs: ca.Pool()} }
