package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// sample is a CPU sample of ns nanoseconds whose stack is frames, leaf first.
func sample(ns int64, frames ...string) *profile.Sample {
	s := &profile.Sample{Value: []int64{1, ns}}
	for _, f := range frames {
		s.Location = append(s.Location, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: f}}}})
	}
	return s
}

// Samples go to the first stage whose rule matches any frame: JSON inside an actor's handler
// is JSON, Pebble under the FSM is the FSM's, a handler's own code is the handler's.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		frames []string
		want   string
	}{
		{[]string{"encoding/json.Marshal", "github.com/shardkeeper/shardkeeper/actors.(*activation).invoke", "net/http.(*conn).serve"}, "JSON"},
		{[]string{"github.com/cockroachdb/pebble/v2.(*DB).Apply", "github.com/shardkeeper/shardkeeper/persistence.(*FSM).ApplyBatch", "github.com/hashicorp/raft.(*Raft).runFSM"}, "FSM apply"},
		{[]string{"github.com/shardkeeper/shardkeeper/services/oracle.(*shard).consume", "github.com/shardkeeper/shardkeeper/actors.(*activation).invoke", "github.com/shardkeeper/shardkeeper/actors.(*dispatcher).run"}, "actor handler"},
		{[]string{"syscall.write", "net/http.(*response).finishRequest", "net/http.(*conn).serve"}, "HTTP server"},
		{[]string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"}, "Go GC"},
		{[]string{"github.com/hashicorp/go-msgpack/v2/codec.(*Decoder).Decode", "github.com/hashicorp/raft.(*NetworkTransport).handleCommand"}, "Raft transport"},
		{[]string{"main.mystery"}, "other"},
	} {
		if got := classify(sample(1, tc.frames...)); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.frames, got, tc.want)
		}
	}
}

// The budget divides the nodes' samples by the run's operations.
func TestBudget(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "run")
	for i, ns := range []int64{3e9, 1e9} { // two nodes: 4 s of CPU in all
		p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
			Sample: []*profile.Sample{sample(ns/2, "encoding/json.Marshal"), sample(ns/2, "github.com/hashicorp/raft.(*Raft).runFSM")}}
		for _, s := range p.Sample { // the tables a written profile needs
			for _, loc := range s.Location {
				loc.ID = uint64(len(p.Location) + 1)
				loc.Line[0].Function.ID = loc.ID
				p.Location = append(p.Location, loc)
				p.Function = append(p.Function, loc.Line[0].Function)
			}
		}
		var b bytes.Buffer
		if err := p.Write(&b); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(prefix+"-node"+string(rune('1'+i))+".pprof", b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(run{OpsPerS: 1000, Seconds: 4, Nodes: 2}) // 4,000 operations
	if err := os.WriteFile(prefix+".json", b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := budget(&out, prefix); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| JSON | 500.0 | 50 % |", "| FSM apply | 500.0 | 50 % |", "| **all, as profiled** | **1000.0** |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
}
