package failover

// Store persists the backup domain a Transport is using, so that the next
// run (the seed's "app launch") starts in BACKUP on it.
//
// Contract: Load returns the saved domain name, or "" when there is none;
// a Store that cannot read its data returns "" and an error, which the
// Transport logs and ignores. Save and Clear may do I/O; the Transport
// calls them off its request path and never concurrently.
type Store interface {
	Load() (string, error)
	Save(domain string) error
	Clear() error
}
