package kit

import (
	"encoding/json"
	"fmt"

	"github.com/shardkeeper/shardkeeper/actors"
)

// Method handles the messages of one method for a handler of type H.
type Method[H any] func(h H, ctx *actors.Context, req actors.Request) ([]byte, error)

// Dispatch routes an actor's messages to its methods by name.
type Dispatch[H any] struct {
	// Name names the kind in errors, e.g. "server registry".
	Name    string
	Methods map[string]Method[H]
}

// Receive runs the method of req on h. An unknown method is an error (a programming error of
// the caller, which rolls back nothing since nothing ran).
func (d Dispatch[H]) Receive(h H, ctx *actors.Context, req actors.Request) ([]byte, error) {
	m, ok := d.Methods[req.Method]
	if !ok {
		return nil, fmt.Errorf("%s: unknown method %s", d.Name, Quote(req.Method))
	}
	return m(h, ctx, req)
}

// JSON is a Method whose body is the JSON encoding of a T: a body that does not decode is the
// outcome invalid_request. A request whose Value is a T (a caller in this process) is not
// decoded at all.
func JSON[H, T any](f func(h H, ctx *actors.Context, in T) ([]byte, error)) Method[H] {
	return func(h H, ctx *actors.Context, req actors.Request) ([]byte, error) {
		if in, ok := req.Value.(T); ok {
			return f(h, ctx, in)
		}
		var in T
		if err := json.Unmarshal(req.Body, &in); err != nil {
			return nil, actors.Errorf("invalid_request", "malformed request: %s", Clip(err.Error()))
		}
		return f(h, ctx, in)
	}
}
