// Package routing is the app side of the routing distribution service
// (seed 004): once per launch the app asks `veer control` which domains its
// session uses, so that a session stays in one data centre.
//
//	res, err := routing.Bootstrap(ctx, cfg, routing.Request{DeviceID: id, App: "bank", Platform: "ios"},
//		routing.Options{Client: client}) // client may be lastmile's
//	ft, err := failover.NewTransport(failover.Config{Primary: res.Primary, Backups: res.Backups}, lm)
//
// Contract: Bootstrap POSTs the Request to Config.URL over the given
// http.Client, verifies the Ed25519 signature against Config.PublicKeys,
// checks that the signed answer is bound to this device (Request.Subject:
// the device ID, or the customer ID for a customer-only request) and not past its
// expires_at (Answer.Check: ErrOtherDevice, ErrExpired, ErrUnbound) and
// returns the answer (Source "service"). When the call fails or the answer
// does not verify, it returns the last verified answer persisted in
// Config.StateFile while its TTL lasts (Source "persisted"), else
// Config.DefaultDomain with Config.DefaultBackups (Source "default", seed 004's fallback to the
// "wap" domain). It returns an error only for an invalid Config: the app
// always gets domains to use.
//
// Failure mode: the state file is written atomically (internal/atomicfile:
// temporary file, fsync, rename, directory fsync); a corrupt, unverifiable
// or unknown-version file is logged as a warning and ignored. routing imports neither failover nor lastmile
// (same layer): the app wires them.
package routing
