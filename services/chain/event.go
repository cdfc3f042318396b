package chain

import (
	"encoding/json"
	"regexp"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/cid"
)

// Event is an attestation event as a client submits it (POST /v1/chains/{chain}/events).
type Event struct {
	EntityID string          `json:"entity_id"`
	Ver      int64           `json:"ver"`
	Op       string          `json:"op"`
	Vis      string          `json:"vis"`
	TS       int64           `json:"ts,omitempty"` // Unix ms; 0: the partition clock's
	CID      string          `json:"cid,omitempty"`
	Manifest json.RawMessage `json:"manifest"`
}

var (
	entityPattern = regexp.MustCompile(`^[A-Za-z0-9._:@-]{1,200}$`)
	wordPattern   = regexp.MustCompile(`^[a-z_]{1,32}$`)
)

// Normalize checks e and puts its manifest in canonical form (RFC 8785), filling in or
// checking its CID. Errors are the outcomes the contract names: invalid_id, invalid_request,
// cid_mismatch.
func (e *Event) Normalize() *actors.Error {
	switch {
	case !entityPattern.MatchString(e.EntityID):
		return actors.Errorf("invalid_id", "entity_id must match %s", entityPattern)
	case e.Ver < 1:
		return actors.Errorf("invalid_request", `"ver" must be an integer >= 1`)
	case !wordPattern.MatchString(e.Op):
		return actors.Errorf("invalid_request", `"op" must match %s`, wordPattern)
	case !wordPattern.MatchString(e.Vis):
		return actors.Errorf("invalid_request", `"vis" must match %s`, wordPattern)
	case e.TS < 0:
		return actors.Errorf("invalid_request", `"ts" must be a Unix time in milliseconds`)
	}
	var obj map[string]json.RawMessage
	if len(e.Manifest) == 0 || json.Unmarshal(e.Manifest, &obj) != nil || obj == nil {
		return actors.Errorf("invalid_request", `"manifest" must be a JSON object`)
	}
	canonical, id, err := cid.OfJSON(e.Manifest)
	if err != nil {
		return actors.Errorf("invalid_request", `"manifest": %v`, err)
	}
	if e.CID != "" && e.CID != id {
		return actors.Errorf("cid_mismatch", "cid %s is not the manifest's: its canonical JSON (RFC 8785) has cid %s", e.CID, id)
	}
	e.Manifest, e.CID = canonical, id
	return nil
}

// Same reports whether repeat is an identical repeat of e (already normalized, both): the
// same op, vis and manifest CID, and the same ts if the repeat gives one.
func (e *Event) Same(repeat *Event) bool {
	return e.Op == repeat.Op && e.Vis == repeat.Vis && e.CID == repeat.CID && (repeat.TS == 0 || repeat.TS == e.TS)
}
