// Command skbudget turns CPU profiles of shardkeeper's nodes into a CPU budget per operation
// by stage of the request path. It reads what `skbench --profile DIR` wrote for one run
// (<name>-node<i>.pprof and <name>.json: the run's operations per second and the profiled
// seconds), sums the nodes' samples, sorts each sample into the first stage whose rule
// matches a frame of its stack, and prints µs per operation and the share of each stage.
//
// Usage:
//
//	go run ./bench/cmd/skbudget DIR/shardkeeper-oracle_issue_consume-64
//
// The stages (rules in order; the first that matches any frame of a stack takes the sample):
// Go GC, JSON (encoding/json anywhere), Go scheduler, FSM apply (hashicorp/raft's runFSM: the
// state machine's Pebble commits), Raft log append (StoreLogs: the synced Pebble commit of the
// log), Pebble WAL writer (its flush and fsync goroutine), Pebble compaction and flush, Raft
// transport (hashicorp/raft's network transport and shardkeeper's Raft connection mux), Raft
// (the rest of hashicorp/raft: leader loop, followers, elections), forwarding (actor remoting
// over gRPC), proposer, actor handler (the domain's code), mailbox and activation, HTTP
// handler (routing, instrumentation, the call into the actors), HTTP server (reading requests,
// writing answers), other Go runtime, other.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// stage is one stage of the request path: a sample belongs to it when any frame of its
// stack starts with one of the prefixes.
type stage struct {
	name     string
	prefixes []string
}

var stages = []stage{
	{"Go GC", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcDrain"}},
	{"JSON", []string{"encoding/json."}},
	{"Go scheduler", []string{"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.goschedImpl"}},
	{"FSM apply", []string{"github.com/hashicorp/raft.(*Raft).runFSM"}},
	{"Raft log append", []string{"github.com/shardkeeper/shardkeeper/persistence.(*LogStore).StoreLogs"}},
	{"Pebble WAL writer", []string{"github.com/cockroachdb/pebble/v2/record.(*LogWriter).flushLoop"}},
	{"Pebble compaction and flush", []string{"github.com/cockroachdb/pebble/v2.(*DB).compact", "github.com/cockroachdb/pebble/v2.(*DB).flush", "github.com/cockroachdb/pebble/v2.(*DB).maybeScheduleFlush"}},
	{"Raft transport", []string{"github.com/hashicorp/raft.(*NetworkTransport)", "github.com/hashicorp/raft.(*netPipeline)", "github.com/shardkeeper/shardkeeper/cluster.(*Mux)", "github.com/shardkeeper/shardkeeper/cluster.(*streamLayer)"}},
	{"Raft", []string{"github.com/hashicorp/raft."}},
	{"forwarding (remoting)", []string{"github.com/asynkron/protoactor-go/remote.", "google.golang.org/grpc."}},
	{"proposer", []string{"github.com/shardkeeper/shardkeeper/actors.(*proposer)"}},
	{"actor handler", []string{"github.com/shardkeeper/shardkeeper/actors.(*activation).invoke"}},
	{"mailbox and activation", []string{"github.com/shardkeeper/shardkeeper/actors.", "github.com/asynkron/protoactor-go/actor."}},
	{"HTTP handler", []string{"net/http.serverHandler.ServeHTTP"}},
	{"HTTP server", []string{"net/http.(*conn).serve"}},
	{"other Go runtime", []string{"runtime."}},
}

// run is one profiled run: its figures and its nodes' profiles.
type run struct {
	OpsPerS float64 `json:"ops_per_s"`
	Seconds float64 `json:"seconds"`
	Nodes   int     `json:"nodes"`
}

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: skbudget DIR/<run name> (as skbench --profile wrote it: <run name>.json and <run name>-node<i>.pprof)")
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := budget(os.Stdout, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "skbudget:", err)
		os.Exit(1)
	}
}

func budget(w io.Writer, prefix string) error {
	var r run
	b, err := os.ReadFile(prefix + ".json")
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &r); err != nil || r.OpsPerS <= 0 || r.Seconds <= 0 {
		return fmt.Errorf("%s.json: not a profiled run (%v)", prefix, err)
	}
	files, _ := filepath.Glob(prefix + "-node*.pprof")
	if len(files) == 0 {
		return errors.New("no profiles " + prefix + "-node*.pprof")
	}
	byStage := map[string]int64{}
	var total int64
	for _, f := range files {
		p, err := readProfile(f)
		if err != nil {
			return err
		}
		cpu := slices.IndexFunc(p.SampleType, func(st *profile.ValueType) bool { return st.Type == "cpu" })
		if cpu < 0 {
			return fmt.Errorf("%s: not a CPU profile", f)
		}
		for _, s := range p.Sample {
			v := s.Value[cpu]
			byStage[classify(s)] += v
			total += v
		}
	}
	ops := r.OpsPerS * r.Seconds
	us := func(ns int64) float64 { return float64(ns) / 1e3 / ops }
	fmt.Fprintf(w, "%s: %d node profile(s), %.0f operations/s over %.0f s\n", filepath.Base(prefix), len(files), r.OpsPerS, r.Seconds)
	fmt.Fprintf(w, "| stage | µs per operation | share |\n|---|---|---|\n")
	names := append(stageNames(), "other")
	for _, n := range names {
		if byStage[n] == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %.1f | %.0f %% |\n", n, us(byStage[n]), 100*float64(byStage[n])/float64(total))
	}
	fmt.Fprintf(w, "| **all, as profiled** | **%.1f** | 100 %% |\n", us(total))
	return nil
}

func readProfile(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func stageNames() []string {
	out := make([]string, len(stages))
	for i, s := range stages {
		out[i] = s.name
	}
	return out
}

// classify names the stage of a sample: the first stage with a prefix matching any frame.
func classify(s *profile.Sample) string {
	var frames []string
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil {
				frames = append(frames, l.Function.Name)
			}
		}
	}
	for _, st := range stages {
		for _, f := range frames {
			for _, p := range st.prefixes {
				if strings.HasPrefix(f, p) {
					return st.name
				}
			}
		}
	}
	return "other"
}
