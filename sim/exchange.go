package sim

import "github.com/veerhq/veer/outcome"

// attempt decides the fate of one exchange with domain d at t and returns
// its outcome, its latency in ns and whether it went over QUIC.
func (x *runner) attempt(t int64, d, net int, flags uint8, rttF float64, server int64, quicBlocked bool) (outcome.Kind, int64, bool) {
	m := x.m
	c := &x.conns[d]
	warm := c.open && c.kills == x.killI && t-c.lastUse <= m.idle
	nm := &m.nets[net]
	dm := &m.domains[d]
	rtt := (nm.rtt + dm.extra) * rttF
	quic := dm.quic && !quicBlocked
	if warm {
		quic = c.quic
	}
	var dns int64 // time to resolve, if the connection is cold
	needDNS := !warm && t >= c.dnsUntil
	if needDNS {
		dns = int64(nm.rtt * rttF)
	}
	fail := func(k outcome.Kind, lat int64) (outcome.Kind, int64, bool) {
		c.open = false
		return k, max(lat, 1), false
	}
	if flags&flagOffline != 0 {
		switch {
		case warm:
			return fail(outcome.ResponseTimeout, m.reqTimeout)
		case needDNS:
			return fail(outcome.DNSTimeout, m.dnsTimeout)
		}
		return fail(outcome.ConnectTimeout, m.dialTimeout)
	}
	// A trace gap delays the exchange by retransmission; it fails only
	// when the delay passes the timeout of the step it stalls.
	stall := x.r.stallDelay(t, m.rto)
	switch {
	case stall == 0:
	case needDNS && stall >= m.dnsTimeout:
		return fail(outcome.DNSTimeout, m.dnsTimeout)
	case !warm && stall >= m.dialTimeout:
		return fail(outcome.ConnectTimeout, dns+m.dialTimeout)
	case stall >= m.reqTimeout:
		return fail(outcome.ResponseTimeout, m.reqTimeout)
	}
	serverError := false
	for _, k := range x.r.outages {
		o := &m.outages[k]
		if o.domainMask&(1<<d) == 0 || (o.networks != 0 && o.networks&(1<<net) == 0) || !o.downAt(t) {
			continue
		}
		switch o.kind {
		case KindDNSFailure:
			if needDNS {
				return fail(outcome.DNSServerFailure, dns)
			}
		case KindDNSTimeout:
			if needDNS {
				return fail(outcome.DNSTimeout, m.dnsTimeout)
			}
		case KindConnectRefused:
			if warm {
				return fail(outcome.ConnectionReset, int64(rtt))
			}
			return fail(outcome.ConnectRefused, dns+int64(rtt))
		case KindConnectTimeout:
			if warm {
				return fail(outcome.ResponseTimeout, m.reqTimeout)
			}
			return fail(outcome.ConnectTimeout, dns+m.dialTimeout)
		case KindTLSFailure:
			if !warm {
				hs := 2.0
				if quic {
					hs = 1
				}
				return fail(outcome.TLSHandshake, dns+int64(hs*rtt))
			}
		case KindServerError:
			serverError = true
		}
	}
	if flags&flagLost != 0 {
		if warm {
			return fail(outcome.ResponseTimeout, m.reqTimeout)
		}
		return fail(outcome.ConnectTimeout, dns+m.dialTimeout)
	}
	lat := rtt + float64(server) + float64(stall)
	if !warm {
		hs := 2.0 // TCP + TLS 1.3
		if quic {
			hs = 1 // QUIC's combined handshake
		}
		lat += float64(dns) + hs*rtt
		if needDNS {
			c.dnsUntil = t + dns + m.dnsTTL
		}
		c.open, c.quic, c.kills = true, quic, x.killI
	}
	if flags&flagRetx != 0 {
		if quic {
			lat += 1.5 * rtt // a probe timeout; other streams are not blocked
		} else {
			lat += max(m.rtoMin, 2*rtt) // an RTO
		}
	}
	l := max(int64(lat), 1)
	if stall > 0 && l >= m.reqTimeout {
		return fail(outcome.ResponseTimeout, m.reqTimeout)
	}
	c.lastUse = max(c.lastUse, t+l)
	if serverError {
		return outcome.ServerError, l, quic
	}
	return outcome.Success, l, quic
}
