package chain

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/cid"
)

// Attestation is the part of an event's Arweave data that links it into its chain.
type Attestation struct {
	PI      string  `json:"pi"` // the entity_id
	Ver     int64   `json:"ver"`
	CID     string  `json:"cid"`
	Op      string  `json:"op"`
	Vis     string  `json:"vis"`
	TS      int64   `json:"ts"`
	PrevTx  *string `json:"prev_tx"`  // null for seq 1
	PrevCID *string `json:"prev_cid"` // null for seq 1
	Seq     int64   `json:"seq"`
}

// Link is what an event links to: the event before it in the chain (zero for seq 1).
type Link struct {
	Seq  int64  // of the previous event; 0 before the first
	TxID string // its transaction id
	CID  string // its manifest's CID
}

// Payload is the data and tags of the transaction anchoring e (normalized) as event prev.Seq+1
// of chain name: {"attestation":{…},"manifest":{…}} in canonical JSON.
func Payload(name string, e *Event, prev Link) (data []byte, tags []arweave.Tag) {
	a := Attestation{PI: e.EntityID, Ver: e.Ver, CID: e.CID, Op: e.Op, Vis: e.Vis, TS: e.TS, Seq: prev.Seq + 1}
	if prev.Seq > 0 {
		a.PrevTx, a.PrevCID = &prev.TxID, &prev.CID
	}
	doc, _ := json.Marshal(struct {
		Attestation Attestation     `json:"attestation"`
		Manifest    json.RawMessage `json:"manifest"`
	}{a, e.Manifest})
	data, _ = cid.Canonical(doc) // doc is JSON made here: it cannot fail
	tag := func(k, v string) arweave.Tag { return arweave.Tag{Name: []byte(k), Value: []byte(v)} }
	tags = []arweave.Tag{
		tag("Content-Type", "application/json"), tag("App-Name", "shardkeeper"), tag("Chain", name),
		tag("Seq", strconv.FormatInt(a.Seq, 10)), tag("Entity", e.EntityID),
	}
	return data, tags
}

// ParsePayload reads an event's transaction data back, checking that the manifest's CID is
// the one attested.
func ParsePayload(data []byte) (Attestation, json.RawMessage, error) {
	var p struct {
		Attestation *Attestation    `json:"attestation"`
		Manifest    json.RawMessage `json:"manifest"`
	}
	if err := json.Unmarshal(data, &p); err != nil || p.Attestation == nil || len(p.Manifest) == 0 {
		return Attestation{}, nil, fmt.Errorf("the data is not an attestation event")
	}
	_, id, err := cid.OfJSON(p.Manifest)
	if err != nil {
		return Attestation{}, nil, fmt.Errorf("the manifest is not JSON: %v", err)
	}
	if id != p.Attestation.CID {
		return *p.Attestation, p.Manifest, fmt.Errorf("the manifest's cid is %s, the attestation says %s", id, p.Attestation.CID)
	}
	return *p.Attestation, p.Manifest, nil
}
