package actors

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/shardkeeper/shardkeeper/ident"
)

// Method handles the messages of one method for a handler of type H.
type Method[H any] func(h H, ctx *Context, req Request) ([]byte, error)

// Dispatch routes an actor's messages to its methods by name.
type Dispatch[H any] struct {
	// Name names the kind in errors, e.g. "server registry".
	Name    string
	Methods map[string]Method[H]
}

// Receive runs the method of req on h. An unknown method is an error (a programming error of
// the caller, which rolls back nothing since nothing ran).
func (d Dispatch[H]) Receive(h H, ctx *Context, req Request) ([]byte, error) {
	m, ok := d.Methods[req.Method]
	if !ok {
		return nil, fmt.Errorf("%s: unknown method %s", d.Name, ident.Quote(req.Method))
	}
	return m(h, ctx, req)
}

// JSON is a Method whose body is the JSON encoding of a T: a body that does not decode is the
// outcome invalid_request. A request whose Value is a T (a caller in this process) is taken
// as it is, without decoding, when T is plain data (see roundTrips): then the value is what
// decoding Body would give.
func JSON[H, T any](f func(h H, ctx *Context, in T) ([]byte, error)) Method[H] {
	takeValue := roundTrips(reflect.TypeFor[T](), map[reflect.Type]bool{})
	return func(h H, ctx *Context, req Request) ([]byte, error) {
		if in, ok := req.Value.(T); ok && takeValue {
			return f(h, ctx, in)
		}
		var in T
		if err := json.Unmarshal(req.Body, &in); err != nil {
			return nil, Errorf("invalid_request", "malformed request: %s", ident.Clip(err.Error()))
		}
		return f(h, ctx, in)
	}
}

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// roundTrips reports whether every value of t decodes from its JSON encoding unchanged:
// booleans, numbers, strings (valid UTF-8, which api.CallRaw checks), and pointers, slices,
// arrays, string-keyed maps and structs of exported, named fields of those. Not so a type
// with its own (un)marshalling (json.RawMessage is compacted, time.Time truncated), an
// interface, or a struct field that JSON leaves out or flattens.
func roundTrips(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true // a recursive type: decided where it was first met
	}
	seen[t] = true
	// A pointer's method set holds the value's: methods of either receiver count.
	pt := reflect.PointerTo(t)
	if pt.Implements(jsonMarshaler) || pt.Implements(jsonUnmarshaler) || pt.Implements(textMarshaler) || pt.Implements(textUnmarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return roundTrips(t.Elem(), seen)
	case reflect.Map:
		return t.Key().Kind() == reflect.String && roundTrips(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Anonymous || f.Tag.Get("json") == "-" || !roundTrips(f.Type, seen) {
				return false
			}
		}
		return true
	}
	return false
}
