package failover

import (
	"errors"
	"slices"
	"strings"
)

// Persistence: the Transport saves the backup domain in use (and, for
// policies that keep one, the per-network history of primary failures)
// through Config.Store. Decisions are taken under the Transport's lock, in
// step, and written after it is released; only the latest decision of each
// kind is written when two race.

// persistence decisions about the domain
const (
	persistNone = iota
	persistSave
	persistClear
)

type persistJob struct {
	seq    uint64
	op     int
	domain string
	// hseq > 0: the history changed; hist is a copy to write.
	hseq uint64
	hist []NetworkFailure
}

// restore reads the store: the persisted backup's index (None if there is
// none or it is unusable) and the persisted history. An unreadable record is
// logged and ignored; a corrupt one, or one naming a domain that is no
// configured backup, is cleared so that the warning is not repeated at
// every start.
func (t *Transport) restore() (int, []NetworkFailure) {
	restored := None
	st := t.cfg.Store
	if st == nil {
		return restored, nil
	}
	saved, err := st.Load()
	stale := false
	switch {
	case err != nil:
		t.log.Warn("failover: ignoring unreadable store", "err", err)
		stale = errors.Is(err, ErrCorruptStore)
	case saved != "":
		for i, b := range t.cfg.Backups {
			if strings.EqualFold(b, saved) {
				restored = i + 1
			}
		}
		if restored == None {
			t.log.Warn("failover: ignoring saved domain that is not a configured backup", "domain", saved)
			stale = true
		}
	}
	if stale {
		if err := st.Clear(); err != nil {
			t.log.Warn("failover: cannot clear the store", "err", err)
		}
	}
	var hist []NetworkFailure
	if hs, ok := st.(HistoryStore); ok && err == nil {
		h, herr := hs.LoadHistory()
		if herr != nil {
			t.log.Warn("failover: ignoring unreadable history", "err", herr)
		}
		hist = h
	}
	return restored, hist
}

// persistTransitionLocked takes the persistence decision a transition
// implies: save the backup entered, clear on return to primary.
func (t *Transport) persistTransitionLocked(tr Transition, from int) {
	if t.cfg.Store == nil {
		return
	}
	switch {
	case tr.To == Backup && tr.Reason != ReasonRestored && tr.Domain != from:
		t.pseq++
		t.pending.seq, t.pending.op, t.pending.domain = t.pseq, persistSave, t.hosts[tr.Domain]
	case tr.Domain == PrimaryIndex && from != PrimaryIndex:
		t.pseq++
		t.pending.seq, t.pending.op, t.pending.domain = t.pseq, persistClear, ""
	}
}

// rememberLocked takes a copy of the policy's history when it changed since
// the last call, for a store that keeps one.
func (t *Transport) rememberLocked() {
	r, ok := t.policy.(NetworkAware)
	if !ok {
		return
	}
	if _, ok := t.cfg.Store.(HistoryStore); !ok {
		return
	}
	if g := r.MemoryGen(); g != t.histGen {
		t.histGen = g
		t.pseq++
		t.pending.hseq = t.pseq
		t.pending.hist = slices.Clone(r.Memory())
	}
}

// persistJobLocked takes the pending store write, if any, and counts it in
// wg so that Close waits for it.
func (t *Transport) persistJobLocked() persistJob {
	j := t.pending
	t.pending = persistJob{}
	if j.op != persistNone || j.hseq != 0 {
		t.wg.Add(1)
	}
	return j
}

// persist writes j unless a later decision of the same kind was written
// already.
func (t *Transport) persist(j persistJob) {
	if j.op == persistNone && j.hseq == 0 {
		return
	}
	defer t.wg.Done()
	t.pmu.Lock()
	defer t.pmu.Unlock()
	var err error
	if j.op != persistNone && j.seq > t.persisted {
		t.persisted = j.seq
		if j.op == persistSave {
			err = t.cfg.Store.Save(j.domain)
		} else {
			err = t.cfg.Store.Clear()
		}
	}
	if j.hseq != 0 && j.hseq > t.hpersisted {
		t.hpersisted = j.hseq
		err = errors.Join(err, t.cfg.Store.(HistoryStore).SaveHistory(j.hist))
	}
	if err != nil {
		t.log.Warn("failover: store write failed", "err", err)
	}
}
