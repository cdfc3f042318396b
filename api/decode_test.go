package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
	"github.com/shardkeeper/shardkeeper/services/all"
)

// goWords match what only Go would say: a package-qualified type (oracle.IssueRequest), the
// decoder's own prefix, Go's type names.
var goWords = regexp.MustCompile(`\b[a-z][a-z0-9]*\.[A-Z]\w*|json:|Go (value|struct)|unmarshal|\bstruct\b|\bint64\b|\bfloat64\b|\[\]uint8|\bmap\[`)

// A body that does not decode is refused with what the API expected, in its words: the body
// or the field (by its JSON name and path) and the kind of value it must be, never a Go type.
func TestDecodeErrorsSayWhatIsExpected(t *testing.T) {
	type request struct {
		Name  string     `json:"name"`
		Ver   int64      `json:"ver"`
		Count uint32     `json:"count"`
		Ratio float64    `json:"ratio"`
		OK    bool       `json:"ok"`
		Key   []byte     `json:"key"`
		Tags  []string   `json:"tags"`
		Addr  netip.Addr `json:"addr"`
		Limit *int       `json:"limit"`
		Meta  struct {
			V string `json:"version"`
		} `json:"meta"`
		Sizes map[string]int `json:"sizes"`
	}
	for _, c := range []struct{ body, want string }{
		{`[]`, "request body must be a JSON object, not an array"},
		{`["org-1"]`, "request body must be a JSON object, not an array"},
		{`"acme"`, "request body must be a JSON object, not a string"},
		{`12`, "request body must be a JSON object, not a number"},
		{`true`, "request body must be a JSON object, not true or false"},
		{``, "request body is empty: it must be a JSON object"},
		{`{"name":1}`, `field "name" must be a string, not a number`},
		{`{"name":{}}`, `field "name" must be a string, not an object`},
		{`{"ver":"1"}`, `field "ver" must be an integer, not a string`},
		{`{"ver":1.5}`, `field "ver" must be an integer, not a number with a fraction or an exponent`},
		{`{"ver":99999999999999999999}`, `field "ver" must be an integer, not a number out of its range`},
		{`{"count":-1}`, `field "count" must be a non-negative integer, not a negative number`},
		{`{"ratio":"x"}`, `field "ratio" must be a number, not a string`},
		{`{"ok":"yes"}`, `field "ok" must be true or false, not a string`},
		{`{"key":5}`, `field "key" must be a base64 string, not a number`},
		{`{"tags":"a"}`, `field "tags" must be a JSON array, not a string`},
		{`{"tags":[1]}`, `field "tags" must be a string, not a number`},
		{`{"addr":1}`, `field "addr" must be a string, not a number`},
		{`{"limit":"10"}`, `field "limit" must be an integer, not a string`},
		{`{"meta":[]}`, `field "meta" must be a JSON object, not an array`},
		{`{"meta":{"version":2}}`, `field "meta.version" must be a string, not a number`},
		{`{"sizes":{"a":"b"}}`, `must be an integer, not a string`},
		{`{"nope":1}`, `unknown field "nope"`},
		{`{"name":`, "request body is not valid JSON: it ends before its value does"},
		{`{"name" "x"}`, "request body is not valid JSON: invalid character"},
		{`{"name":"x"} {}`, "trailing data after the JSON body"},
	} {
		var dst request
		e := api.DecodeBytes([]byte(c.body), &dst)
		switch {
		case e == nil:
			t.Errorf("%s: decoded", c.body)
		case e.Status != http.StatusBadRequest || e.Code != "invalid_request":
			t.Errorf("%s: %d %s, want 400 invalid_request", c.body, e.Status, e.Code)
		case !strings.Contains(e.Message, c.want):
			t.Errorf("%s: %q, want it to say %q", c.body, e.Message, c.want)
		case goWords.MatchString(e.Message):
			t.Errorf("%s: %q speaks Go: %q", c.body, e.Message, goWords.FindString(e.Message))
		}
	}
	// The decoder's error for a value it took apart ("1.5") never echoes the value.
	if e := api.DecodeBytes([]byte(`{"ver":123456.789}`), new(request)); e == nil || strings.Contains(e.Message, "123456") {
		t.Errorf("the message repeats the client's number: %v", e)
	}
}

// Through the real routes: a request body of the wrong JSON type is answered 400
// invalid_request saying what the route expected, never the Go type it decodes into.
func TestRequestBodyOfWrongTypeInAPIWords(t *testing.T) {
	cfg := config.Default()
	cfg.AdminToken = "secret"
	mux, err := node.NewMux(nil, prometheus.NewRegistry(), all.Services(), refusingCaller{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	handler := api.RouteErrors(mux)
	post := func(method, path, body string) (int, api.Error) {
		req := httptest.NewRequest(method, "http://sk"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer secret")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		var e api.Error
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		return rec.Code, e
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/v1/nonces", `[]`, "request body must be a JSON object, not an array"},
		{"POST", "/v1/nonces", `{"org_id":7}`, `field "org_id" must be a string, not a number`},
		{"POST", "/v1/nonces/n1/consume", `["org-1"]`, "request body must be a JSON object, not an array"},
		{"POST", "/v1/attest/reg/register", `[{"device_id":"d1"}]`, "request body must be a JSON object, not an array"},
		{"POST", "/v1/attest/reg/register", `{"device_id":"d1","public_key":12}`, `field "public_key" must be a string, not a number`},
		{"POST", "/v1/attest/reg/verify", `"d1"`, "request body must be a JSON object, not a string"},
		{"PUT", "/v1/servers/reg/s1", `{"address":"a:1","meta":"x"}`, ""},
		{"PUT", "/v1/servers/reg/s1", `[]`, "request body must be a JSON object, not an array"},
	} {
		status, e := post(c.method, c.path, c.body)
		if c.want == "" { // whatever the route makes of it, in its words
			if goWords.MatchString(e.Message) {
				t.Errorf("%s %s %s: %q speaks Go", c.method, c.path, c.body, e.Message)
			}
			continue
		}
		if status != http.StatusBadRequest || e.Code != "invalid_request" || !strings.Contains(e.Message, c.want) || goWords.MatchString(e.Message) {
			t.Errorf("%s %s %s: %d %s %q, want 400 invalid_request saying %q", c.method, c.path, c.body, status, e.Code, e.Message, c.want)
		}
	}
	// Every body-taking route, with each wrong JSON type.
	for _, r := range fuzzRoutes {
		if r.method == "GET" || r.method == "DELETE" {
			continue
		}
		path := strings.Replace(r.path, "%s", "x1", 1)
		for _, body := range []string{`[]`, `"s"`, `1`, `true`, `[{"a":1}]`} {
			status, e := post(r.method, path, body)
			if status != http.StatusBadRequest || goWords.MatchString(e.Message) || !bytes.Contains([]byte(e.Message), []byte("must be")) {
				t.Errorf("%s %s %s: %d %s %q", r.method, path, body, status, e.Code, e.Message)
			}
		}
	}
}
