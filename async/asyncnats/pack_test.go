package asyncnats

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/veerhq/veer/async"
	"github.com/veerhq/veer/async/asyncnats/natstest"
)

// TestPackedSubmissions: with batch on, concurrent submissions share
// stored messages (fewer messages than submissions), every id is found,
// listed and run exactly once, and a member whose attempt fails (503)
// retries alone: its pack's other members do not run again.
//
// Both servers: the embedded 2.15 and Debian's external 2.9.
func TestPackedSubmissions(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		packedSubmissions(t, openEmbedded(t, t.TempDir(), async.Config{Batch: new(true)}))
	})
	t.Run("external", func(t *testing.T) {
		srv := natstest.Start(t, t.TempDir())
		packedSubmissions(t, openExternal(t, srv.URL(), async.Config{Batch: new(true)}))
	})
}

func packedSubmissions(t *testing.T, e *Engine) {
	cfg := async.Config{Batch: new(true)}
	b := newBackend(t)
	b.status["/flaky"] = []int{503}
	sts := newStates()
	s := newService(t, e, cfg, b.dispatcher(), sts)
	defer s.Close()
	const n = 300
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			path := fmt.Sprintf("/p/%d", i)
			if i == 7 {
				path = "/flaky"
			}
			id, _, err := s.Submit(context.Background(), &async.Invocation{Tenant: fmt.Sprintf("t%d", i%2), Method: "POST", Host: "h", Path: path, Body: []byte(path)})
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	info, err := e.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs >= n {
		t.Fatalf("%d messages for %d submissions: nothing packed", info.State.Msgs, n)
	}
	t.Logf("%d submissions in %d messages", n, info.State.Msgs)
	for i, id := range ids {
		inv, err := e.Lookup(context.Background(), id)
		if err != nil || inv.ID != id || inv.Tenant != fmt.Sprintf("t%d", i%2) {
			t.Fatalf("Lookup(%s) = %+v, %v", id, inv, err)
		}
	}
	var listed int
	for _, tn := range []string{"t0", "t1"} {
		for cursor := uint64(0); ; {
			page, next, err := s.List(context.Background(), tn, cursor, 50)
			if err != nil {
				t.Fatal(err)
			}
			listed += len(page)
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	if listed != n {
		t.Fatalf("listed %d of %d", listed, n)
	}
	s.Start()
	waitDone(t, b, n)
	st := sts.wait(t, ids[7], async.Succeeded)
	if st.Attempts != 2 || st.Group != async.RetryGroup {
		t.Fatalf("the flaky member: %+v, want 2 attempts, the second in the retry group", st)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, id := range ids {
		want := 1
		if i == 7 {
			want = 2
		}
		if b.seen[id] != want {
			t.Errorf("%s ran %d times, want %d", id, b.seen[id], want)
		}
	}
}

// TestDelayedOverJetStream: a submission delayed 3 s (the timer group)
// and a packed one beside it: the delayed one's first attempt starts no
// earlier than its NotBefore (server and service on the wall clock), the
// other runs at once, and a status read meanwhile says queued.
func TestDelayedOverJetStream(t *testing.T) {
	cfg := async.Config{Batch: new(true)}
	e := openEmbedded(t, t.TempDir(), cfg)
	b := newBackend(t)
	sts := newStates()
	s := newService(t, e, cfg, b.dispatcher(), sts)
	defer s.Close()
	s.Start()
	at := time.Now().Add(3 * time.Second)
	late := &async.Invocation{Tenant: "t", Method: "POST", Host: "h", Path: "/late", NotBefore: at}
	lid, _, err := s.Submit(context.Background(), late)
	if err != nil || late.Group != async.TimerGroup {
		t.Fatalf("delayed submit: %v, group %s", err, late.Group)
	}
	nid, _, err := s.Submit(context.Background(), &async.Invocation{Tenant: "t", Method: "POST", Host: "h", Path: "/now"})
	if err != nil {
		t.Fatal(err)
	}
	sts.wait(t, nid, async.Succeeded)
	if st, err := s.Status(context.Background(), "t", lid); err != nil || st.State != async.Queued || time.Now().After(at) {
		t.Fatalf("delayed, before its time: %+v, %v (checked at %v, due %v)", st, err, time.Now(), at)
	}
	st := sts.wait(t, lid, async.Succeeded)
	if st.FirstAttempt.Before(at) {
		t.Fatalf("first attempt at %v, before its NotBefore %v", st.FirstAttempt, at)
	}
}

// FuzzDecodePack: any bytes under either pack encoding decode or fail
// with an error, never panic; what encodePack writes decodes to itself.
func FuzzDecodePack(f *testing.F) {
	good, _ := encodePack([]packItem{{Meta: meta{Invocation: async.Invocation{Tenant: "t", Method: "POST", Path: "/"}, Nonce: "0123456789abcdef"}, Body: []byte("x")}, {ID: "5-0123456789abcdef"}})
	f.Add(good, true)
	f.Add([]byte(`[{"m":{"tenant":"t","nonce":"0123456789abcdef"},"b":"eA=="}]`), false)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, true)
	f.Fuzz(func(t *testing.T, data []byte, binary bool) {
		h := nats.Header{packHeader: {packJSON}}
		if binary {
			h.Set(packHeader, packBinary)
		}
		items, err := decodePack(h, data)
		if err != nil {
			return
		}
		again, err := encodePack(items)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodePack(nats.Header{packHeader: {packBinary}}, again)
		if err != nil || len(back) != len(items) {
			t.Fatalf("re-encoded pack: %d items, %v; want %d", len(back), err, len(items))
		}
		for i := range back {
			if back[i].ID != items[i].ID || string(back[i].Body) != string(items[i].Body) || back[i].Meta.Nonce != items[i].Meta.Nonce {
				t.Fatalf("item %d: %+v, want %+v", i, back[i], items[i])
			}
		}
	})
}

// TestDecodeOldPacks: a JSON pack (what earlier versions stored) is still
// read, so an upgrade runs the invocations queued before it.
func TestDecodeOldPacks(t *testing.T) {
	invs, err := decodeAll(7, nats.Header{packHeader: {packJSON}}, []byte(`[{"m":{"tenant":"t","method":"POST","path":"/a","nonce":"0123456789abcdef"},"b":"eA=="}]`))
	if err != nil || len(invs) != 1 || invs[0].ID != "7-0123456789abcdef" || string(invs[0].Body) != "x" || invs[0].Path != "/a" {
		t.Fatalf("decodeAll = %+v, %v", invs, err)
	}
}

// BenchmarkPackCodec: encoding and decoding one pack of 64 submissions of
// 1 KiB (what a flush of 64 concurrent submitters carries), in the JSON
// form of earlier versions and the binary form.
func BenchmarkPackCodec(b *testing.B) {
	body := make([]byte, 1024)
	items := make([]packItem, 64)
	for i := range items {
		items[i] = packItem{Meta: meta{Invocation: async.Invocation{Tenant: fmt.Sprintf("t%d", i%8), Group: "general", Method: "POST", Host: "h", Path: "/job",
			Header: map[string][]string{"Content-Type": {"application/json"}}, Submitted: time.Now()}, Nonce: "0123456789abcdef"}, Body: body}
	}
	for _, form := range []string{packJSON, packBinary} {
		b.Run(map[string]string{packJSON: "json", packBinary: "binary"}[form], func(b *testing.B) {
			h := nats.Header{packHeader: {form}}
			for b.Loop() {
				var data []byte
				if form == packJSON {
					data, _ = json.Marshal(items)
				} else {
					data, _ = encodePack(items)
				}
				if _, err := decodePack(h, data); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(data)))
			}
		})
	}
}
