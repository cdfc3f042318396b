package persistence

import (
	"bytes"
	"math"
	"testing"
)

// hashicorp/raft tells a missing key from a failure by comparing err.Error() with
// "not found" (raft.NewRaft and raft.HasExistingState reading CurrentTerm, raft.go reading
// LastVoteTerm/LastVoteCand), so the text must be exact.
func TestStableStoreNotFound(t *testing.T) {
	st := newStore(t).StableStore(1)
	v, err := st.Get([]byte("CurrentTerm"))
	if err == nil || err.Error() != "not found" {
		t.Fatalf("Get of a missing key = %q, %v; want error \"not found\"", v, err)
	}
	if v != nil {
		t.Fatalf("Get of a missing key returned value %q", v)
	}
	n, err := st.GetUint64([]byte("CurrentTerm"))
	if err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 of a missing key = %d, %v; want error \"not found\"", n, err)
	}
	if n != 0 {
		t.Fatalf("GetUint64 of a missing key = %d, want 0", n)
	}
}

func TestStableStoreRoundTrip(t *testing.T) {
	st := newStore(t).StableStore(1)
	kv := map[string][]byte{
		"LastVoteCand": []byte("node-1"),
		"":             []byte("empty key"),
		"\x00\xff":     {0x00, 0xff},
		"empty":        {},
		"big":          bytes.Repeat([]byte{0x5a}, 1<<16),
	}
	for k, v := range kv {
		if err := st.Set([]byte(k), v); err != nil {
			t.Fatalf("Set(%q): %v", k, err)
		}
	}
	for k, want := range kv {
		got, err := st.Get([]byte(k))
		if err != nil {
			t.Fatalf("Get(%q): %v", k, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Get(%q) = %q, want %q", k, got, want)
		}
	}
	// Overwrite.
	if err := st.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get([]byte("LastVoteCand")); err != nil || string(got) != "node-2" {
		t.Fatalf("after overwrite Get = %q, %v; want node-2", got, err)
	}
	// A key that is a prefix of a stored key is still missing.
	if _, err := st.Get([]byte("LastVote")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of a prefix of a stored key = %v, want not found", err)
	}

	for _, n := range []uint64{0, 1, 255, 256, 1 << 40, math.MaxUint64} {
		if err := st.SetUint64([]byte("CurrentTerm"), n); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetUint64([]byte("CurrentTerm"))
		if err != nil || got != n {
			t.Fatalf("GetUint64 = %d, %v; want %d", got, err, n)
		}
	}
	// A value that is not 8 bytes is an error, not a misread integer.
	if _, err := st.GetUint64([]byte("LastVoteCand")); err == nil || err.Error() == "not found" {
		t.Fatalf("GetUint64 of a 6-byte value: err = %v, want a decoding error", err)
	}
}

func TestStableStorePartitionIsolation(t *testing.T) {
	s := newStore(t)
	if err := s.StableStore(1).SetUint64([]byte("CurrentTerm"), 5); err != nil {
		t.Fatal(err)
	}
	if err := s.StableStore(2).SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[uint32]uint64{1: 5, 2: 9} {
		if got, err := s.StableStore(p).GetUint64([]byte("CurrentTerm")); err != nil || got != want {
			t.Fatalf("partition %d CurrentTerm = %d, %v; want %d", p, got, err, want)
		}
	}
	if _, err := s.StableStore(3).Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("partition 3 sees another partition's key: %v", err)
	}
	// Stable keys are not log entries, and log entries are not stable keys.
	checkBounds(t, s.LogStore(1), 0, 0)
	if err := s.LogStore(1).StoreLogs(testLogs(1, 3)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.StableStore(1).GetUint64([]byte("CurrentTerm")); err != nil || got != 5 {
		t.Fatalf("after storing logs CurrentTerm = %d, %v; want 5", got, err)
	}
}

func TestStableStoreSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	if err := s.StableStore(4).SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.StableStore(4).Set([]byte("LastVoteCand"), []byte("n3")); err != nil {
		t.Fatal(err)
	}
	closeS()

	s, _ = openStore(t, dir)
	st := s.StableStore(4)
	if got, err := st.GetUint64([]byte("CurrentTerm")); err != nil || got != 42 {
		t.Fatalf("CurrentTerm after reopen = %d, %v; want 42", got, err)
	}
	if got, err := st.Get([]byte("LastVoteCand")); err != nil || string(got) != "n3" {
		t.Fatalf("LastVoteCand after reopen = %q, %v; want n3", got, err)
	}
}
