package actors_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
)

// A message's reads see its own latest write of each key, however many keys it writes (a
// few are looked up by scanning, many through an index), and the next message sees the same.
// Checked against a model over messages of a few to many writes, keys repeating.
func TestMessageReadsItsOwnWrites(t *testing.T) {
	e := actortest.New(t, actortest.Options{}, actors.Kind{Name: "kv", New: func(string) actors.Handler { return kvHandler{} }})
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[string]string{}
	var keys []string
	for i := range 40 {
		keys = append(keys, fmt.Sprint("k", i))
	}
	str := func(s string) *string { return &s }
	call := func(w writesRequest) []*string {
		body, _ := json.Marshal(w)
		var got []*string
		if err := json.Unmarshal(e.MustCall("kv", "w", "writes", body), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	check := func(what string, got []*string) {
		t.Helper()
		for i, k := range keys {
			want, ok := model[k]
			if ok != (got[i] != nil) || ok && *got[i] != want {
				t.Fatalf("%s: %s = %v, want %q (present %v)", what, k, got[i], want, ok)
			}
		}
	}
	for round, n := range []int{1, 3, 15, 16, 17, 40, 100, 2, 60} {
		var w writesRequest
		for i := range n {
			k := keys[rng.IntN(min(n/2+1, len(keys)))] // a narrow key range: the same key again, before and after the index
			if rng.IntN(4) == 0 {
				w.Writes = append(w.Writes, [2]*string{str(k), nil})
				delete(model, k)
			} else {
				v := fmt.Sprint(round, "/", i)
				w.Writes = append(w.Writes, [2]*string{str(k), str(v)})
				model[k] = v
			}
		}
		w.Get = keys
		check(fmt.Sprintf("round %d, %d writes, in the message", round, n), call(w))
		check(fmt.Sprintf("round %d, the next message", round), call(writesRequest{Get: keys}))
	}
}
