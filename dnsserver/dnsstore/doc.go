// Package dnsstore is the control-plane store Source of dnsserver: `veer
// dns` with a control_store section reads its zones and access nodes from
// the store the control plane writes (store.Store, etcd for several
// instances), and follows every change (store.Follow: list, then watch,
// re-list after a reset).
//
// Documents. KeyZones ("dns/zones") holds the zones and the region table in
// the shape of the data file's zones and regions sections (dnsserver.Data),
// decoded strictly: an unknown field, a bad record or a bad CIDR is an error
// naming the key, the line and the field. An access domain there lists no
// nodes: its nodes come from store.KeyAccess ("access/nodes"), the very document
// the control plane's scheduling API serves, so that a node marked down or
// removed there leaves the DNS answers too (one source of truth). A node
// serves an access domain when its domains list is empty or names the
// domain (without the trailing dot); its region is the region it is listed
// under, "default" nodes get the empty region (they serve clients whose
// region has no node). When every node of a domain is marked down, all of
// them are answered (fail open, as health checks do). When dns/zones has no
// regions, the regions of the routing table (store.KeyTable, "routing/table") are
// used: the CIDR table the control plane routes with.
//
// Failure mode: a document that does not parse or validate, or a
// combination the server rejects (an access domain without any node), is
// logged and counted (veer_dnsstore_updates_total{result="invalid"}); the
// last good data keeps serving. While the store is unreachable the last data
// keeps serving and Follow re-lists until it is back
// (veer_dnsstore_resets_total counts the interruptions). Nothing is served
// from the store before dns/zones exists: the config file's data stays.
//
// The package imports store only: cmd/veer picks the backend (etcd, or the
// embedded bbolt file, which only one process can open and so only serves
// a DNS running in the same process as its writer, i.e. tests).
package dnsstore
