package chain

import (
	"encoding/json"
	"testing"
)

func TestNormalize(t *testing.T) {
	ok := func() *Event {
		return &Event{EntityID: "org:acme.device@1", Ver: 1, Op: "create", Vis: "public", Manifest: json.RawMessage(`{"b": 1, "a": [1.0, "x"]}`)}
	}
	e := ok()
	if err := e.Normalize(); err != nil {
		t.Fatal(err)
	}
	if string(e.Manifest) != `{"a":[1,"x"],"b":1}` || e.CID == "" {
		t.Fatalf("normalized %s %s", e.Manifest, e.CID)
	}
	given := ok()
	given.CID = e.CID
	if err := given.Normalize(); err != nil {
		t.Fatalf("the right cid given: %v", err)
	}
	for name, tc := range map[string]struct {
		mutate func(*Event)
		code   string
	}{
		"entity id with a space": {func(e *Event) { e.EntityID = "a b" }, "invalid_id"},
		"ver 0":                  {func(e *Event) { e.Ver = 0 }, "invalid_request"},
		"op upper case":          {func(e *Event) { e.Op = "Create" }, "invalid_request"},
		"vis empty":              {func(e *Event) { e.Vis = "" }, "invalid_request"},
		"manifest an array":      {func(e *Event) { e.Manifest = json.RawMessage(`[1]`) }, "invalid_request"},
		"manifest missing":       {func(e *Event) { e.Manifest = nil }, "invalid_request"},
		"manifest null":          {func(e *Event) { e.Manifest = json.RawMessage(`null`) }, "invalid_request"},
		"duplicate member":       {func(e *Event) { e.Manifest = json.RawMessage(`{"a":1,"a":2}`) }, "invalid_request"},
		"another cid":            {func(e *Event) { e.CID = "bafkreicecnx2gvntm6fbcrvnc336qze6st5u7qq7457igegamd3bzkx7ri" }, "cid_mismatch"},
	} {
		e := ok()
		tc.mutate(e)
		if err := e.Normalize(); err == nil || err.Code != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
	// Identical repeats: same op, vis, manifest (in any spelling) and, if given, ts.
	a, b := ok(), ok()
	a.TS = 5
	b.Manifest = json.RawMessage(`{"a":[1,"x"],"b":1.0}`)
	_, _ = a.Normalize(), b.Normalize()
	if !a.Same(b) {
		t.Error("a repeat without ts, its manifest spelled otherwise, is not the same")
	}
	b.TS = 6
	if a.Same(b) {
		t.Error("a repeat with another ts is the same")
	}
	b.TS, b.Op = 5, "update"
	if a.Same(b) {
		t.Error("a repeat with another op is the same")
	}
}
