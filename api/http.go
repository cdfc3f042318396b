package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
)

// MaxBody is the largest request body accepted (413 body_too_large beyond it).
const MaxBody = 64 << 10

// InvalidID is the error for a malformed identifier. The message names the field only: an
// answer never repeats what the client sent.
func InvalidID(field string) *Error {
	return Errorf(http.StatusBadRequest, "invalid_id", "%s is not a valid identifier", field)
}

// DecodeJSON reads r's body into dst: at most MaxBody bytes (413 body_too_large), one JSON
// value, no unknown fields (400 invalid_request). Required-field checks are the caller's.
func DecodeJSON(r *http.Request, dst any) *Error {
	body, err := ReadBody(r)
	if err != nil {
		return Errorf(http.StatusBadRequest, "invalid_request", "read body: %v", err)
	}
	if len(body) > MaxBody {
		return Errorf(http.StatusRequestEntityTooLarge, "body_too_large", "request body exceeds %d bytes", MaxBody)
	}
	return DecodeBytes(body, dst)
}

// ReadBody reads r's body, at most MaxBody bytes and one: a body Shed already read is not
// copied again.
func ReadBody(r *http.Request) ([]byte, error) {
	if rb, ok := r.Body.(*readBody); ok {
		return rb.b, nil
	}
	// Grown as bytes arrive, from a small first buffer: a Content-Length is the client's word,
	// not memory to set aside. A small one sizes that buffer, so that a typical body takes one
	// allocation of its own size (one more byte, to read the end without growing).
	size := 512
	if r.ContentLength >= 0 && r.ContentLength < int64(size) {
		size = int(r.ContentLength) + 1
	}
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Body.Read(b[len(b):min(cap(b), MaxBody+1)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) || len(b) > MaxBody {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// readBody is a request body read in full.
type readBody struct {
	*bytes.Reader
	b []byte
}

func (readBody) Close() error { return nil }

// DecodeBytes decodes one JSON value from body into dst, rejecting unknown fields and
// trailing data. Its errors say in the API's words what was expected — "request body must
// be a JSON object", "field \"ver\" must be an integer, not a string" — never in the Go
// types dst is made of.
func DecodeBytes(body []byte, dst any) *Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return Errorf(http.StatusBadRequest, "invalid_request", "%s", decodeError(err, dst))
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "invalid_request", "trailing data after the JSON body")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Errorf(http.StatusBadRequest, "invalid_request", "trailing data after the JSON body")
	}
	return nil
}

// decodeError says why body did not decode into dst, in the API's words: what the body or a
// field must be, the field by its JSON name (its path in nested objects, "meta.version").
func decodeError(err error, dst any) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "request body is empty: it must be " + jsonKind(reflect.TypeOf(dst))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "request body is not valid JSON: it ends before its value does"
	case errors.As(err, &syntax):
		// The decoder's words ("invalid character 'x' looking for beginning of value") are
		// JSON's; the offset tells where.
		return fmt.Sprintf("request body is not valid JSON: %s (at byte %d)", ident.Clip(syntax.Error()), syntax.Offset)
	case errors.As(err, &typ):
		got := jsonValueWord(typ.Value, typ.Type)
		if typ.Field == "" {
			return fmt.Sprintf("request body must be %s, not %s", jsonKind(typ.Type), got)
		}
		return fmt.Sprintf("field %s must be %s, not %s", ident.Quote(typ.Field), jsonKind(typ.Type), got)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		// The client's own field name, clipped.
		return "unknown field " + ident.Clip(f)
	}
	// A field type's own decoder (a base64 string, an amount): its message is ours.
	return "invalid JSON body: " + ident.Clip(strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names the JSON value that decodes into t: "a JSON object", "a string", ….
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string" // an identifier, a key, an amount: a JSON string as the type reads it
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string" // []byte, as encoding/json decodes it
		}
		return "a JSON array"
	case reflect.Array:
		return "a JSON array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON value"
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// jsonValueWord names what the decoder found where a t was expected, from
// UnmarshalTypeError.Value ("array", "string", "number", or "number -1" for a number that
// does not fit t): its kind only, never the client's value.
func jsonValueWord(v string, t reflect.Type) string {
	kind, literal, _ := strings.Cut(v, " ")
	switch kind {
	case "object":
		return "an object"
	case "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "number":
		switch {
		case literal == "":
			return "a number"
		case strings.ContainsAny(literal, ".eE") && jsonKind(t) != "a number":
			return "a number with a fraction or an exponent"
		case strings.HasPrefix(literal, "-") && jsonKind(t) == "a non-negative integer":
			return "a negative number"
		}
		return "a number out of its range"
	}
	return "another kind of value"
}

// Missing is the error for a required field that is absent or empty.
func Missing(field string) *Error {
	return Errorf(http.StatusBadRequest, "invalid_request", "missing required field %q", field)
}

// Admin wraps h so that it requires the admin token: with no token configured admin
// endpoints are disabled (403 admin_disabled); a wrong or missing token is 401 unauthorized.
func Admin(token string, h http.HandlerFunc) http.HandlerFunc {
	return Bearer(token, "admin", h)
}

// Bearer wraps h so that it requires the bearer token of the paths named what ("admin",
// "relayer"): with no token configured they are disabled (403 <what>_disabled); a wrong or
// missing token is 401 unauthorized. The comparison takes the same time whatever the token
// sent, its length included: the digests of both are compared.
func Bearer(token, what string, h http.HandlerFunc) http.HandlerFunc {
	carries := BearerCheck(token)
	return func(w http.ResponseWriter, r *http.Request) {
		if token == "" {
			WriteAPIError(w, Errorf(http.StatusForbidden, what+"_disabled", "%s endpoints are disabled: no %s token is configured", what, what))
			return
		}
		if !carries(r) {
			WriteAPIError(w, Errorf(http.StatusUnauthorized, "unauthorized", "missing or wrong %s token", what))
			return
		}
		h(w, r)
	}
}

// BearerCheck returns a test of whether a request carries Authorization: Bearer <token>,
// compared as Bearer does: by digests, in constant time. With token "" (none configured) it
// never holds.
func BearerCheck(token string) func(*http.Request) bool {
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) bool {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(sum[:], want[:]) == 1 && ok && token != ""
	}
}

// LocalCaller is an actors.Caller that can also tell whether an actor runs on this node (its
// partition is led here), so that work free to pick its actor can avoid a network hop.
type LocalCaller interface {
	actors.Caller
	Local(kind, id string) bool
}

// CallJSON marshals in as the request body, calls the actor with the request deadline and
// unmarshals the reply into out (when out is non-nil).
func CallJSON(ctx context.Context, c actors.Caller, timeout time.Duration, kind, id, method string, in, out any) error {
	reply, err := CallRaw(ctx, c, timeout, kind, id, method, in)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(reply, out)
}

// CallRaw is CallJSON returning the reply's JSON undecoded, for handlers whose response body
// is the actor's reply as it stands (see WriteRawJSON): decoding and encoding it again was a
// tenth of the API's CPU on the nonce path.
func CallRaw(ctx context.Context, c actors.Caller, timeout time.Duration, kind, id, method string, in any) ([]byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := actors.Request{Method: method, Body: body, Value: in}
	if bytes.Contains(body, invalidUTF8) {
		req.Value = nil // encoding changed a string: the actor must see what Body says
	}
	return c.Call(ctx, kind, id, req)
}

// invalidUTF8 is how encoding/json writes a string's invalid UTF-8 (a literal U+FFFD is
// written as itself).
var invalidUTF8 = []byte(`\ufffd`)

// LateCaller is an actors.Caller whose target is set later: actor kinds are built before the router
// that reaches the cluster exists, and their effects call through this. Before Set, calls
// fail with actors.ErrUnavailable.
type LateCaller struct{ c atomic.Pointer[actors.Caller] }

// Set makes calls go to c.
func (l *LateCaller) Set(c actors.Caller) { l.c.Store(&c) }

// Call implements actors.Caller.
func (l *LateCaller) Call(ctx context.Context, kind, id string, req actors.Request) ([]byte, error) {
	c := l.c.Load()
	if c == nil {
		return nil, actors.ErrUnavailable
	}
	return (*c).Call(ctx, kind, id, req)
}
