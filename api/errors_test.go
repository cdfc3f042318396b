package api_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
)

// A service's codes map its outcomes to their statuses; a code claimed with another status is
// refused and changes nothing.
func TestCodes(t *testing.T) {
	write := func(c *api.Codes, code string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		c.WriteError(rec, actors.Errorf(code, "test"))
		return rec
	}
	if rec := write(api.CoreCodes(), "test_teapot"); rec.Code != http.StatusInternalServerError {
		t.Fatalf("an unknown code answered %d, want 500", rec.Code)
	}
	if rec := write(nil, "not_found"); rec.Code != http.StatusNotFound {
		t.Fatalf("nil Codes answered a core code %d, want 404", rec.Code)
	}
	c, err := api.CoreCodes().With(map[string]int{"test_teapot": http.StatusTeapot, "test_gone": http.StatusGone})
	if err != nil {
		t.Fatal(err)
	}
	if rec := write(c, "test_teapot"); rec.Code != http.StatusTeapot || !strings.Contains(rec.Body.String(), `"error":"test_teapot"`) {
		t.Fatalf("added code: %d %s", rec.Code, rec.Body)
	}
	if rec := write(api.CoreCodes(), "test_teapot"); rec.Code != http.StatusInternalServerError {
		t.Fatalf("adding codes to one table changed another: %d", rec.Code)
	}
	if _, err := c.With(map[string]int{"test_teapot": http.StatusTeapot}); err != nil {
		t.Fatalf("the same code and status again: %v", err)
	}
	if _, err := c.With(map[string]int{"test_other": http.StatusAccepted, "test_gone": http.StatusNotFound}); err == nil || !strings.Contains(err.Error(), "test_gone") {
		t.Fatalf("a code with another status: %v", err)
	}
	if _, ok := c.Map()["test_other"]; ok {
		t.Fatal("a refused addition changed the table")
	}
	if _, err := api.CoreCodes().With(map[string]int{"not_found": http.StatusGone}); err == nil {
		t.Fatal("a core code given another status was accepted")
	}
}

// An invalid identifier is named by its field only.
func TestInvalidIDNamesTheField(t *testing.T) {
	e := api.InvalidID("registry")
	if e.Code != "invalid_id" || e.Status != http.StatusBadRequest || e.Message != "registry is not a valid identifier" {
		t.Fatalf("InvalidID: %d %s %q", e.Status, e.Code, e.Message)
	}
}

// An error other than the contract's is answered 500 internal without its text, which may
// tell how the node works inside.
func TestInternalErrorsAreNotAnswered(t *testing.T) {
	e := api.CoreCodes().AsError(errors.New("pebble: /var/lib/shardkeeper/000123.sst: checksum mismatch"))
	if e.Status != http.StatusInternalServerError || e.Code != "internal" || strings.Contains(e.Message, "pebble") {
		t.Fatalf("AsError: %d %s %q", e.Status, e.Code, e.Message)
	}
}

// A body with a huge unknown field name is refused without repeating it.
func TestDecodeErrorsAreClipped(t *testing.T) {
	var dst struct {
		A int `json:"a"`
	}
	e := api.DecodeBytes([]byte(`{"`+strings.Repeat("f", 60000)+`":1}`), &dst)
	if e == nil || e.Code != "invalid_request" || len(e.Message) > 300 {
		t.Fatalf("DecodeBytes: %v", e != nil)
	}
}
