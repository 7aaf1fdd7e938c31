// Package dnsserver is veer's private authoritative DNS ("ZNS" in ZEGO's
// last-mile chain): the server that lastmile's resolver asks when public DNS
// fails or is hijacked.
//
// It answers authoritatively for the configured zones (SOA, NS, A, AAAA,
// CNAME, TXT, MX, SRV, CAA, PTR; NXDOMAIN and NODATA with the SOA in the
// authority section, per-record TTLs, CNAME chains followed inside the
// zones) and REFUSES everything else: it never recurses. Access domains are
// answered from health-checked access nodes: the healthy nodes of the
// client's region (EDNS Client Subnet, RFC 7871, else the source address,
// against the region table), weighted-shuffled; when every node is down all
// are answered (fail open). Names come back in the letter case the
// question was asked in (0x20, as NSD and Knot), and MX, SRV and NS answers
// carry the A and AAAA records of their in-zone targets in the additional
// section, left out without TC when only they do not fit.
//
// Transports: UDP and TCP on one port and DNS over TLS (RFC 7858) here;
// DNS over HTTPS (RFC 8484, HTTP/2 and HTTP/3) in the sub-package
// dnsserver/doh, so that users of the core do not link QUIC.
//
// Contract: the query path (Server.Answer) reads an immutable snapshot of
// the data through an atomic pointer; its only locks are response rate
// limiting's per-prefix bucket and the answer cache's read lock. Apply and
// SetData swap the snapshot (and an empty cache) whole, so a reload never
// drops or half-answers a query. Answers to plain queries for static names
// (records or NODATA) are cached packed and served by copy and patch (ID,
// RD, CD, the question as asked); NXDOMAIN comes from the zone's packed
// template and REFUSED without unpacking, byte for byte the full path's
// answer; access-domain answers are computed for every query. On Linux the
// UDP readers use recvmmsg and sendmmsg with buffers set up once, so a
// query allocates nothing on these paths.
//
// Failure modes: a malformed packet, or a packet that is itself a response,
// is dropped and counted (veer_dnsserver_dropped_total), never answered
// and never a crash. UDP answers larger than the client's EDNS0 size, the
// configured UDP size or the amplification bound are truncated (TC) so that
// clients retry over TCP. Response rate limiting drops a flooding prefix's
// answers except every Slip-th, sent truncated. An invalid reload is
// rejected with an error naming the field and the old data keeps serving.
// A health check that cannot run counts as a failed check; a node is up
// until its first check. Server.NodeHealth (and HealthHandler, its JSON at
// NodeHealthPath, which `veer dns` serves beside /metrics for the
// console) reports each node's last probe with the time of its last change.
//
// Not supported (on purpose): recursion, zone transfers, dynamic update,
// DNSSEC, wildcards, delegation below a zone's apex.
package dnsserver
