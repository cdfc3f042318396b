package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/await"
)

// A sealed object is the object with a signature member last: a release that predates
// signatures reads it as the object, the signature covers the object's exact bytes, and any
// change to them, another key or no signature at all is told apart.
func TestSealedGossip(t *testing.T) {
	s, err := newGossipSigner()
	if err != nil {
		t.Fatal(err)
	}
	meta := NodeMeta{ID: "a", ServerID: "a@1f2e3d", Raft: "10.0.0.1:7000", Partitions: 64, Groups: 3, Leading: 1, Keys: "abc,def"}
	obj, _ := json.Marshal(meta)
	sealed := s.seal(purposeMeta, obj)

	var old NodeMeta // as a release that predates signatures decodes it
	if err := json.Unmarshal(sealed, &old); err != nil || old != meta {
		t.Fatalf("sealed metadata decodes as %+v (%v), want %+v", old, err, meta)
	}
	got, sig := unseal(sealed)
	if !bytes.Equal(got, obj) || sig == "" || sigKey(sig) != s.kid {
		t.Fatalf("unseal(%s) = %s, %q", sealed, got, sig)
	}
	if _, err := verify(s.pub, s.kid, purposeMeta, got, sig); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if _, err := verify(s.pub, s.kid, purposeRecord, got, sig); !errors.Is(err, errBadSignature) {
		t.Fatalf("a metadata signature taken for a record's: %v", err)
	}
	tampered := bytes.Replace(got, []byte(`"lead":1`), []byte(`"lead":7`), 1)
	if _, err := verify(s.pub, s.kid, purposeMeta, tampered, sig); !errors.Is(err, errBadSignature) {
		t.Fatalf("tampered metadata: %v", err)
	}
	other, _ := newGossipSigner()
	if _, err := verify(other.pub, other.kid, purposeMeta, got, sig); !errors.Is(err, errOtherKey) {
		t.Fatalf("another key: %v", err)
	}
	if obj, sig := unseal(obj); !bytes.Equal(obj, obj) || sig != "" {
		t.Fatalf("unsigned metadata unsealed with signature %q", sig)
	}
	if _, err := verify(s.pub, s.kid, purposeMeta, obj, ""); !errors.Is(err, errUnsigned) {
		t.Fatalf("unsigned: %v", err)
	}
	// Sequence numbers grow with each signature: a replay is told from the latest.
	p := proof{key: s.pub}
	if err := p.checkMeta(got, sig); err != nil {
		t.Fatal(err)
	}
	newer, newerSig := unseal(s.seal(purposeMeta, obj))
	if err := p.checkMeta(newer, newerSig); err != nil {
		t.Fatal(err)
	}
	if err := p.checkMeta(got, sig); !errors.Is(err, errReplayed) {
		t.Fatalf("replayed metadata: %v", err)
	}

	// A record: the same, as a release that predates signatures decodes it.
	rec := record{G: 1, First: 2, End: 4, Term: math.MaxUint64, Leader: "a@1", Voters: []string{"a@1", "b@1"}, Lag: map[string]uint64{"b@1": 3}}
	recObj, _ := json.Marshal(rec)
	var oldRec record
	if err := json.Unmarshal(s.seal(purposeRecord, recObj), &oldRec); err != nil || !reflect.DeepEqual(oldRec, rec) {
		t.Fatalf("sealed record decodes as %+v (%v), want %+v", oldRec, err, rec)
	}

	if got := changedFields(meta, NodeMeta{ID: "a", ServerID: "a@x", Raft: meta.Raft, Partitions: 64, Groups: 3, Leading: 1, Keys: "abc,def", DiskLow: true}); !slices.Equal(got, []string{"sid", "disk_low"}) {
		t.Fatalf("changedFields = %v", got)
	}
}

// A probed listener announces its key; one of a release that predates signed gossip closes
// the probe without a word, which is no error.
func TestReadAnnouncement(t *testing.T) {
	s, _ := newGossipSigner()
	if key, err := readAnnouncement(bytes.NewReader(s.announcement())); err != nil || !key.Equal(s.pub) {
		t.Fatalf("announcement read as %x, %v", key, err)
	}
	if key, err := readAnnouncement(bytes.NewReader(nil)); err != nil || key != nil {
		t.Fatalf("nothing read as %x, %v", key, err)
	}
	if _, err := readAnnouncement(bytes.NewReader(s.announcement()[:10])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a cut announcement: %v", err)
	}
	if _, err := readAnnouncement(bytes.NewReader(append([]byte{9}, s.pub...))); err == nil {
		t.Fatal("an announcement of an unknown kind was taken")
	}
}

// A node that restarts signs with a new key: the others prove it again and take its
// metadata and records, and refuse what its earlier run signed when it is replayed.
func TestSignedGossipAcrossRestart(t *testing.T) {
	c := startSignedCluster(t, []string{"a", "b", "c", "d"}, false)
	v, out := c.nodes[c.victim], c.nodes[c.outsider]
	before := c.views()
	oldMeta := v.m.sealedMeta()
	oldRec, _ := out.dir.record(1)

	c.restart(t, v, false, v.sid())
	c.settle(t)
	await.True(t, 15*time.Second, "every node as before, the outsider with the restarted leader's record", func() bool {
		rec, _ := out.dir.record(1)
		return rec.key == v.m.signer.kid && reflect.DeepEqual(c.views(), before)
	})

	marks := c.logMarks()
	f := newForger(t, c.key)
	f.alive(c, v, oldMeta)
	for _, n := range c.nodes {
		f.record(n, oldRec.raw)
	}
	if !c.awaitEffect(before, func() bool { return c.metaRefused(marks, v.id, "none") }) {
		c.dumpLogs(t, marks)
		t.Error("the earlier run's metadata, replayed, was not logged")
	}
	c.pass(t)
	c.unchanged(t, before, "replaying the earlier run's metadata and record")

	// A wiped disk: a new server id, which the others take, so that the leader of group 0
	// replaces the voter of the lost log, as it should.
	c.restart(t, v, false, v.id+"@2")
	await.True(t, 15*time.Second, "every node sees the victim's new server id", func() bool {
		for _, n := range c.nodes {
			if stateOf(n.m, v.id).NodeMeta != v.m.Local() {
				return false
			}
		}
		return true
	})
	l := c.nodes[c.leaders[0]]
	l.recon.Pass(time.Now())
	l.host.mu.Lock()
	defer l.host.mu.Unlock()
	if want := "0 remove " + v.sid() + ": its node came back with a new data directory"; !slices.Contains(l.host.changes, want) {
		t.Fatalf("group 0's leader changed %v, want %q", l.host.changes, want)
	}
}

// In a cluster with TLS where one member runs a release that predates signed gossip, that
// member is listed and its metadata and records are taken unsigned — trusted to the holders
// of the gossip key, as before, which each node logs. Once it is upgraded (restarted on this
// release), its unsigned metadata is refused, and a record taken unsigned in its name, even
// of term 2^64-1, gives way to the records it signs.
func TestMixedReleaseCluster(t *testing.T) {
	c := startSignedCluster(t, []string{"a", "b", "c", "d"}, true)
	v, out := c.nodes[c.victim], c.nodes[c.outsider]
	for _, n := range c.nodes {
		if n != v && !n.logs.has(0, slog.LevelWarn, "gossip member runs a release that does not sign", func(a map[string]string) bool { return a["node"] == v.id }) {
			t.Errorf("%s did not log that %s does not sign", n.id, v.id)
		}
	}
	if rec, _ := out.dir.record(1); rec.key != legacyKey {
		t.Fatalf("the outsider's record of the unsigned leader's group: key %q", rec.key)
	}
	before := c.views()

	// Within the mixed window, a record in the unsigned member's name is trusted.
	f := newForger(t, c.key)
	forged, _ := out.dir.record(1)
	forged.raw, forged.key, forged.Term = nil, "", math.MaxUint64
	forged.Voters, forged.Lag = []string{v.sid(), out.sid()}, nil
	f.record(out, mustJSON(forged))
	await.True(t, 10*time.Second, "the outsider takes the unsigned record", func() bool {
		rec, _ := out.dir.record(1)
		return rec.Term == math.MaxUint64
	})

	// Upgraded: it signs, so that what it signed counts again, and nothing unsigned does.
	c.restart(t, v, false, v.sid())
	c.settle(t)
	await.True(t, 15*time.Second, "the outsider takes the upgraded leader's signed record", func() bool {
		rec, _ := out.dir.record(1)
		return rec.Term == 5 && rec.key == v.m.signer.kid
	})
	c.unchanged(t, before, "the upgrade")
	genuine := v.m.Local()
	genuine.ServerID = v.id + "@forged"
	marks := c.logMarks()
	f.alive(c, v, mustJSON(genuine))
	if !c.awaitEffect(before, func() bool { return c.metaRefused(marks, v.id, "sid") }) {
		t.Error("unsigned metadata of the upgraded member was not logged")
	}
	c.pass(t)
	c.unchanged(t, before, "forging the upgraded member's server id")
}
