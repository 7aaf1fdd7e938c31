// Package control is veer's control plane (`veer control`): routing
// distribution (seed 004: which domains a session uses), the scheduling API
// (seed 002's "access-ctrl": which access nodes a client tries) and the
// admin API that edits the documents behind both and the gateways'
// criticality tables and limits (docs/control.md).
//
//	svc, err := control.New(control.Config{}, control.Options{}) // ./veer-data, embedded store
//	addrs, err := svc.Start()                                    // public API and admin API
//	defer svc.Close()
//
// Contract. A Service follows its store (embedded bbolt in DataDir, or etcd)
// with store.Follow and compiles the documents (store/keys.go names them;
// routing/table, routing/state, routing/emergency, routing/whitelists/*,
// access/nodes) into an immutable Snapshot published through an atomic
// pointer: POST /v1/route and POST /v1/schedule read it without a lock, and
// a decision allocates nothing. Route answers are signed with the
// instance's Ed25519 key (routing.Sign; a client verifies them with
// routing.Verify) and carry the store revision as their version, so
// instances on one etcd give one device the same answer. The schedule's
// wire schema is routing/schedule's, the access document's store/docs'.
// The admin API (bearer tokens, roles viewer < operator < admin) validates
// every document strictly before it writes it (ValidateDocument: errors read
// "key:line: field: problem"), writes with If-Match semantics, and records
// author and reason in the store's history; a dry run reports who a change
// would move.
//
// Rollouts (docs/release.md). POST /v1/admin/rollouts/{route} starts,
// pauses, resumes or aborts a gray release (release.Rollout under
// release/<route>; 409 while one is active); every RolloutInterval the
// service pools the gateways' release-counts/<route>/ documents of each
// running rollout's step, calls Rollout.Judge and writes a promotion or an
// abort with If-Match, audited with the verdict's reason. A store error
// skips that tick (logged); an operator's write in between wins.
//
// Failure modes. A document that does not validate is refused and the stored
// one keeps running; a stored document that no longer compiles (written
// around the API) is logged, counted (veer_control_snapshots_total
// {result="invalid"}) and the previous snapshot stays in force. While
// the store is unreachable, answers continue from the last snapshot and
// writes answer 503 with Retry-After; a watch that cannot continue re-lists.
// Before the first routing table, /v1/route answers 503 (ErrNotReady); with
// no access document, or no healthy node for the client's region and
// domain, /v1/schedule answers 503. A corrupt embedded store, signing key or
// admin token file is an error at New naming the file, never replaced.
// Request bodies are bounded (1 MiB on the admin API); malformed ones get a
// 4xx naming the problem.
package control
