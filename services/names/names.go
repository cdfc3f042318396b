// Package names bounds how many names of one namespace the cluster holds — registry names, for one:
// each new name gets a fresh quota of its own, so without a bound anyone could mint names,
// and store, without limit. One actor per namespace holds the set (one key per name and a
// count); a write to a new name first enrolls it (Enroller), and past the bound the write is
// refused. A name once enrolled stays so.
package names

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
)

// MethodEnroll is the names actor's one method: body {name, max}; reply {} or the outcome
// registry_full.
const MethodEnroll = "enroll"

var count = actors.Counter{Key: []byte("count")}

// Kind is the actor kind holding the enrolled names of namespaces (one actor per namespace),
// named kind.
func Kind(kind string) actors.Kind {
	return actors.Kind{Name: kind, New: func(string) actors.Handler { return set{} }}
}

// set is the actor holding one namespace's names.
type set struct{}

type enrollment struct {
	Name string `json:"name"`
	Max  int    `json:"max"`
	What string `json:"what"` // what the names are, for the refusal ("device registries")
}

func (set) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	if req.Method != MethodEnroll {
		return nil, actors.Errorf("invalid_request", "names: unknown method %s", ident.Quote(req.Method))
	}
	var in enrollment
	if err := json.Unmarshal(req.Body, &in); err != nil || in.Name == "" {
		return nil, actors.Errorf("invalid_request", "names: malformed enrollment")
	}
	key := append([]byte("n/"), in.Name...)
	if _, found, err := ctx.Get(key); err != nil || found {
		return []byte("{}"), err
	}
	n, err := count.Get(ctx)
	if err != nil {
		return nil, err
	}
	if n >= in.Max {
		return nil, actors.Errorf("registry_full", "the cluster holds %d %s, its --max-registries: no new one can be created", n, in.What)
	}
	ctx.Put(key, nil)
	count.Set(ctx, n+1)
	return []byte("{}"), nil
}

// Enroller enrolls names of one namespace before they are written to. Names it saw enrolled
// are remembered (up to enrollerMemory) so that writes to them skip the call. Safe for
// concurrent use.
type Enroller struct {
	Caller actors.Caller
	// Kind is the names kind (Kind), Namespace its actor, What the names' plural for
	// messages.
	Kind, Namespace, What string
	Max                   int
	Timeout               time.Duration

	mu    sync.Mutex
	known map[string]bool
}

// enrollerMemory bounds the names an Enroller remembers; past it, it asks every time.
const enrollerMemory = 1 << 16

// Enroll enrolls name, or returns the outcome registry_full (or the call's error).
func (e *Enroller) Enroll(ctx context.Context, name string) error {
	e.mu.Lock()
	known := e.known[name]
	e.mu.Unlock()
	if known {
		return nil
	}
	body, _ := json.Marshal(enrollment{Name: name, Max: e.Max, What: e.What})
	ctx, cancel := context.WithTimeout(ctx, e.Timeout)
	defer cancel()
	if _, err := e.Caller.Call(ctx, e.Kind, e.Namespace, actors.Request{Method: MethodEnroll, Body: body}); err != nil {
		return err
	}
	e.mu.Lock()
	if e.known == nil {
		e.known = map[string]bool{}
	}
	if len(e.known) < enrollerMemory {
		e.known[name] = true
	}
	e.mu.Unlock()
	return nil
}
