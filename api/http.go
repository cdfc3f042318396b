package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/kit"
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
// trailing data.
func DecodeBytes(body []byte, dst any) *Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		// The decoder's message may name an unknown field, as long as the client made it.
		return Errorf(http.StatusBadRequest, "invalid_request", "malformed JSON body: %s", kit.Clip(err.Error()))
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

// Caller sends requests to actors: the actor runtime on this node (and, with clustering,
// the router that forwards to the partition's leader).
type Caller interface {
	Call(ctx context.Context, kind, id string, req actors.Request) ([]byte, error)
}

// LocalCaller is a Caller that can also tell whether an actor runs on this node (its
// partition is led here), so that work free to pick its actor can avoid a network hop.
type LocalCaller interface {
	Caller
	Local(kind, id string) bool
}

// CallJSON marshals in as the request body, calls the actor with the request deadline and
// unmarshals the reply into out (when out is non-nil).
func CallJSON(ctx context.Context, c Caller, timeout time.Duration, kind, id, method string, in, out any) error {
	reply, err := CallRaw(ctx, c, timeout, kind, id, method, in)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(reply, out)
}

// CallRaw is CallJSON returning the reply's JSON undecoded, for handlers whose response body
// is the actor's reply as it stands (see WriteRawJSON): decoding and encoding it again was a
// tenth of the API's CPU on the nonce path.
func CallRaw(ctx context.Context, c Caller, timeout time.Duration, kind, id, method string, in any) ([]byte, error) {
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

// LateCaller is a Caller whose target is set later: actor kinds are built before the router
// that reaches the cluster exists, and their effects call through this. Before Set, calls
// fail with actors.ErrUnavailable.
type LateCaller struct{ c atomic.Pointer[Caller] }

// Set makes calls go to c.
func (l *LateCaller) Set(c Caller) { l.c.Store(&c) }

// Call implements Caller.
func (l *LateCaller) Call(ctx context.Context, kind, id string, req actors.Request) ([]byte, error) {
	c := l.c.Load()
	if c == nil {
		return nil, actors.ErrUnavailable
	}
	return (*c).Call(ctx, kind, id, req)
}
