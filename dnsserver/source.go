package dnsserver

import "context"

// Source delivers the served Data: what it has now, then every change.
// dnsserver/dnsfile watches a YAML file; a source on the control plane's
// store watches its document the same way.
type Source interface {
	// Run calls apply with the current Data, then with each change, until
	// ctx is done. It returns an error only when it cannot start. An apply
	// error means the Data was invalid and not put in force; the source
	// keeps running.
	Run(ctx context.Context, apply func(Data) error) error
}

// Run serves the Data of src until ctx is done; it blocks. The first Data
// src delivers replaces the config file's.
func (s *Server) Run(ctx context.Context, src Source) error {
	return src.Run(ctx, s.SetData)
}
