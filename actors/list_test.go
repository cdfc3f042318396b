package actors_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
)

// List merges committed state, uncommitted writes of earlier messages and the message's own
// writes, for every combination of prefix, range, limit and direction. Checked against a
// model on random operations, with some commits held back so all three layers are populated.
func TestListAgainstModel(t *testing.T) {
	var g *actortest.Gated
	handled := make(chan struct{}, 64)
	k := signalling(actors.Kind{Name: "kv", New: func(string) actors.Handler { return kvHandler{} }}, handled)
	e := actortest.New(t, actortest.Options{Runtime: actors.Options{RequestTimeout: 30 * time.Second}, Wrap: func(m *actors.MemReplicator) actors.Replicator { g = actortest.NewGated(m); return g }}, k)

	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]string{}
	keys := []string{"a", "ab", "abc", "b", "ba", "c", "ca", "cab", "d", "\x00", "\xff", "a\xff"}
	for round := range 300 {
		// A few writes, each handled before the next is sent (so their order is known) while
		// their commits are held: the first is in flight, the rest uncommitted in the overlay.
		for range rng.IntN(4) {
			key := keys[rng.IntN(len(keys))]
			req := actors.Request{Method: "delete", Body: []byte(key)}
			if rng.IntN(3) > 0 {
				v := fmt.Sprint(round)
				req = actors.Request{Method: "put", Body: []byte(key + "=" + v)}
				model[key] = v
			} else {
				delete(model, key)
			}
			go func() { _, _ = e.Runtime.Call(context.Background(), "kv", "m", req) }()
			<-handled
		}
		l := listRequest{Options: actors.ListOptions{Limit: rng.IntN(4), Reverse: rng.IntN(2) == 0}}
		o := &l.Options
		if rng.IntN(2) == 0 {
			o.Prefix = []byte(keys[rng.IntN(len(keys))][:1])
		}
		if rng.IntN(3) == 0 {
			o.Start = []byte(keys[rng.IntN(len(keys))])
		}
		if rng.IntN(3) == 0 {
			o.End = []byte(keys[rng.IntN(len(keys))])
		}
		if rng.IntN(2) == 0 { // the message's own write is visible to its List
			l.Put = &[2][]byte{[]byte(keys[rng.IntN(len(keys))]), []byte(fmt.Sprint("own", round))}
			model[string(l.Put[0])] = string(l.Put[1])
		}
		want, _ := json.Marshal(modelList(model, *o))
		body, _ := json.Marshal(l)
		reply := make(chan string, 1)
		go func() { reply <- string(e.MustCall("kv", "m", "list", body)) }()
		<-handled
		// Now let every held commit through until the list's reply is released.
		var got string
	release:
		for {
			select {
			case <-g.Proposed:
				g.Release <- nil
			case got = <-reply:
				break release
			}
		}
		if got != string(want) {
			t.Fatalf("round %d list %+v:\n got %s\nwant %s", round, l, got, want)
		}
	}
}

func modelList(m map[string]string, o actors.ListOptions) [][2]string {
	var ks []string
	for k := range m {
		kb := []byte(k)
		if o.Prefix != nil && !bytes.HasPrefix(kb, o.Prefix) {
			continue
		}
		if o.Start != nil && bytes.Compare(kb, o.Start) < 0 {
			continue
		}
		if o.End != nil && bytes.Compare(kb, o.End) >= 0 {
			continue
		}
		ks = append(ks, k)
	}
	sort.Strings(ks)
	if o.Reverse {
		sort.Sort(sort.Reverse(sort.StringSlice(ks)))
	}
	if o.Limit > 0 && len(ks) > o.Limit {
		ks = ks[:o.Limit]
	}
	out := [][2]string{}
	for _, k := range ks {
		out = append(out, [2]string{k, m[k]})
	}
	return out
}
