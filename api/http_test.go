package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
)

// ReadBody returns the body whole up to MaxBody+1 bytes, whatever the Content-Length says and
// however the reader hands out its bytes.
func TestReadBody(t *testing.T) {
	for _, size := range []int{0, 1, 46, 511, 512, 513, 5000, MaxBody, MaxBody + 1, MaxBody + 100} {
		body := bytes.Repeat([]byte("abcdefg"), size/7+1)[:size]
		want := body[:min(size, MaxBody+1)]
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"whole":          func(r io.Reader) io.Reader { return r },
			"byte by byte":   iotest.OneByteReader,
			"EOF with bytes": iotest.DataErrReader,
		} {
			for _, length := range []int64{int64(size), -1} {
				r := httptest.NewRequest(http.MethodPost, "/", nil)
				r.Body, r.ContentLength = io.NopCloser(wrap(bytes.NewReader(body))), length
				got, err := ReadBody(r)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%d bytes, %s, Content-Length %d: %d bytes, %v; want %d", size, name, length, len(got), err, len(want))
				}
			}
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body = io.NopCloser(iotest.TimeoutReader(strings.NewReader(strings.Repeat("x", 600))))
	if _, err := ReadBody(r); err == nil {
		t.Fatal("a failing read: no error")
	}
}

// recordCaller keeps the request it is called with.
type recordCaller struct{ req actors.Request }

func (c *recordCaller) Call(_ context.Context, _, _ string, req actors.Request) ([]byte, error) {
	c.req = req
	return nil, nil
}

// CallRaw hands the actor its value as well as its encoding, unless encoding changed the value
// (a string of invalid UTF-8 is sent as U+FFFD).
func TestCallRawValue(t *testing.T) {
	type in struct{ S string }
	for _, c := range []struct {
		s         string
		wantValue bool
	}{{"plain <&>", true}, {"\uFFFD itself", true}, {"bad \xff", false}} {
		var rc recordCaller
		if _, err := CallRaw(context.Background(), &rc, time.Second, "k", "i", "m", in{c.s}); err != nil {
			t.Fatal(err)
		}
		if got := rc.req.Value != nil; got != c.wantValue {
			t.Errorf("%q: Value set %v, want %v (body %s)", c.s, got, c.wantValue, rc.req.Body)
		}
		var back in
		if err := json.Unmarshal(rc.req.Body, &back); err != nil || c.wantValue && back.S != c.s {
			t.Errorf("%q: body %s decodes to %q, %v", c.s, rc.req.Body, back.S, err)
		}
	}
}
