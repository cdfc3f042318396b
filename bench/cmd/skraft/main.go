// Command skraft measures hashicorp/raft alone, as shardkeeper runs it, to tell the engine's
// cost per write from shardkeeper's: three member processes on loopback, each with one
// Pebble store (shardkeeper's persistence package: fsynced Raft logs) and --groups Raft
// groups over hashicorp/raft's TCP transport, with shardkeeper's Raft settings (batched
// applies, 256 entries per AppendEntries, commit timeout 500 ms). The leaderships are spread
// over the members; --clients goroutines, spread over the groups and running in the members
// that lead them, propose --size-byte entries in a closed loop. The state machine only counts.
//
// It prints writes per second and the members' CPU time per write, read from /proc. With
// --profile DIR it also writes a CPU profile of each member for the measured time, in the
// form bench/cmd/skbudget reads (skbudget DIR/raft-<groups>g-<clients>c).
//
// Usage (from the repository root):
//
//	go run ./bench/cmd/skraft [--groups 1] [--clients 64] [--size 128] [--duration 10s] [--warmup 2s] [--profile DIR]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // the members' profiles, on their control listener
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

const members = 3

func main() {
	if len(os.Args) > 1 && os.Args[1] == "member" {
		if err := member(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "skraft member:", err)
			os.Exit(1)
		}
		return
	}
	if err := drive(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "skraft:", err)
		os.Exit(1)
	}
}

// plan is what every member is told: the groups and every member's addresses.
type plan struct {
	Groups  int        `json:"groups"`
	Raft    [][]string `json:"raft"` // [member][group] → address
	Control []string   `json:"control"`
}

func drive(args []string) error {
	fs := flag.NewFlagSet("skraft", flag.ContinueOnError)
	groups := fs.Int("groups", 1, "Raft groups, each replicated on the three members")
	clients := fs.Int("clients", 64, "concurrent proposers in all, spread over the groups")
	size := fs.Int("size", 128, "bytes per entry")
	duration := fs.Duration("duration", 10*time.Second, "measured time")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured warm-up")
	profile := fs.String("profile", "", "directory for the members' CPU profiles (bench/cmd/skbudget reads them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *groups < 1 || *clients < *groups || *size < 1 || *duration <= 0 || *warmup < 0 {
		return errors.New("need --groups ≥ 1, --clients ≥ --groups, --size ≥ 1, --duration > 0, --warmup ≥ 0")
	}
	tmp, err := os.MkdirTemp("", "skraft-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p := plan{Groups: *groups}
	for range members {
		var addrs []string
		for range *groups {
			addrs = append(addrs, freeAddr())
		}
		p.Raft = append(p.Raft, addrs)
		p.Control = append(p.Control, freeAddr())
	}
	conf, _ := json.Marshal(p)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, c := range procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	for i := range members {
		c := exec.Command(self, "member", "--id", strconv.Itoa(i), "--dir", filepath.Join(tmp, strconv.Itoa(i)), "--plan", string(conf))
		c.Stderr = os.Stderr
		out, _ := c.StdoutPipe()
		if err := c.Start(); err != nil {
			return err
		}
		procs = append(procs, c)
		if !bufio.NewScanner(out).Scan() {
			return fmt.Errorf("member %d did not start", i)
		}
	}
	fmt.Fprintf(os.Stderr, "skraft: %d members, %d group(s) each; waiting for the leaders\n", members, *groups)
	leads, err := waitLeaders(p)
	if err != nil {
		return err
	}
	// Clients go to each member in proportion to the groups it leads.
	start := time.Now().Add(500 * time.Millisecond)
	from, to := start.Add(*warmup), start.Add(*warmup+*duration)
	counts, failed := make([]int64, members), make([]int64, members)
	ran := 0 // clients started, in all
	errs := make([]error, members)
	var wg sync.WaitGroup
	for i := range members {
		n := *clients * len(leads[i]) / *groups
		ran += n
		wg.Go(func() {
			var r struct{ Count, Failed int64 }
			url := fmt.Sprintf("http://%s/load?clients=%d&size=%d&start=%d&from=%d&to=%d", p.Control[i], n, *size, start.UnixNano(), from.UnixNano(), to.UnixNano())
			errs[i] = getJSON(url, &r)
			counts[i], failed[i] = r.Count, r.Failed
		})
	}
	time.Sleep(time.Until(from))
	cpu0 := cpuOf(procs)
	var prof sync.WaitGroup
	name := fmt.Sprintf("raft-%dg-%dc", *groups, *clients)
	seconds := max(int((*duration-500*time.Millisecond)/time.Second), 1)
	if *profile != "" {
		for i := range members {
			prof.Go(func() {
				if err := saveProfile(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.Control[i], seconds),
					filepath.Join(*profile, fmt.Sprintf("%s-node%d.pprof", name, i+1))); err != nil {
					fmt.Fprintln(os.Stderr, "skraft: profile:", err)
				}
			})
		}
	}
	time.Sleep(time.Until(to))
	cpu1 := cpuOf(procs)
	wg.Wait()
	prof.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var total, fails int64
	for i := range counts {
		total += counts[i]
		fails += failed[i]
	}
	if fails > 0 {
		fmt.Fprintf(os.Stderr, "skraft: %d proposals failed (a leadership moved, or one timed out): the figures are not clean\n", fails)
	}
	rate := float64(total) / duration.Seconds()
	perWrite := (cpu1 - cpu0).Seconds() * 1e3 / float64(max(total, 1))
	fmt.Printf("hashicorp/raft, %d members, %d group(s), %d clients, %d-byte entries: %.0f writes/s, %.3f ms CPU per write (all members)\n",
		members, *groups, ran, *size, rate, perWrite)
	if *profile != "" {
		b, _ := json.MarshalIndent(map[string]any{"ops_per_s": rate, "seconds": seconds, "nodes": members}, "", "  ")
		return os.WriteFile(filepath.Join(*profile, name+".json"), b, 0o644)
	}
	return nil
}

// waitLeaders waits until member i leads the groups g with g % members == i (the members
// hand over the others), and returns what each member leads.
func waitLeaders(p plan) ([][]int, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		leads := make([][]int, members)
		led := 0
		for i := range members {
			var r struct{ Leads []int }
			if err := getJSON(fmt.Sprintf("http://%s/leads", p.Control[i]), &r); err != nil {
				return nil, err
			}
			leads[i] = r.Leads
			led += len(r.Leads)
		}
		if led == p.Groups { // each group led by the member it was given to
			return leads, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("leaderships not settled within 60 s: %v", leads)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// member runs one member: its groups, and the control listener.
func member(args []string) error {
	fs := flag.NewFlagSet("member", flag.ContinueOnError)
	id := fs.Int("id", 0, "")
	dir := fs.String("dir", "", "")
	planJSON := fs.String("plan", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var p plan
	if err := json.Unmarshal([]byte(*planJSON), &p); err != nil {
		return err
	}
	store, err := persistence.Open(*dir, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	rafts := make([]*raft.Raft, p.Groups)
	for g := range p.Groups {
		trans, err := raft.NewTCPTransport(p.Raft[*id][g], nil, 3, 10*time.Second, io.Discard)
		if err != nil {
			return err
		}
		rc := raft.DefaultConfig()
		rc.LocalID = raft.ServerID(strconv.Itoa(*id))
		rc.LogOutput = io.Discard
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
		rc.CommitTimeout = 500 * time.Millisecond
		rc.BatchApplyCh = true
		rc.MaxAppendEntries = 256
		rc.SnapshotThreshold = 1 << 40
		logs, stable := store.LogStore(uint32(g)), store.StableStore(uint32(g))
		snaps := raft.NewInmemSnapshotStore()
		if *id == 0 {
			var servers []raft.Server
			for m := range members {
				servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(m)), Address: raft.ServerAddress(p.Raft[m][g])})
			}
			if err := raft.BootstrapCluster(rc, logs, stable, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
				return err
			}
		}
		if rafts[g], err = raft.NewRaft(rc, &counter{}, logs, stable, snaps, trans); err != nil {
			return err
		}
	}
	mux := http.DefaultServeMux // net/http/pprof's handlers are there
	mux.HandleFunc("/leads", func(w http.ResponseWriter, r *http.Request) {
		// Each group is given to member g % members: a leader of another's group hands it over.
		var leads []int
		for g, rf := range rafts {
			switch {
			case rf.State() != raft.Leader:
			case g%members == *id:
				leads = append(leads, g)
			default:
				to := g % members
				_ = rf.LeadershipTransferToServer(raft.ServerID(strconv.Itoa(to)), raft.ServerAddress(p.Raft[to][g])).Error()
			}
		}
		_ = json.NewEncoder(w).Encode(map[string][]int{"Leads": leads})
	})
	mux.HandleFunc("/load", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		clients, _ := strconv.Atoi(q.Get("clients"))
		size, _ := strconv.Atoi(q.Get("size"))
		at := func(k string) time.Time { n, _ := strconv.ParseInt(q.Get(k), 10, 64); return time.Unix(0, n) }
		start, from, to := at("start"), at("from"), at("to")
		var led []*raft.Raft
		for _, rf := range rafts {
			if rf.State() == raft.Leader {
				led = append(led, rf)
			}
		}
		var count, failed atomic.Int64
		if len(led) > 0 {
			time.Sleep(time.Until(start))
			var wg sync.WaitGroup
			entry := make([]byte, size)
			for c := range clients {
				rf := led[c%len(led)]
				wg.Go(func() {
					for time.Now().Before(to) {
						if rf.Apply(entry, 5*time.Second).Error() != nil {
							failed.Add(1)
							continue
						}
						if now := time.Now(); !now.Before(from) && now.Before(to) {
							count.Add(1)
						}
					}
				})
			}
			wg.Wait()
		}
		_ = json.NewEncoder(w).Encode(map[string]int64{"Count": count.Load(), "Failed": failed.Load()})
	})
	ln, err := net.Listen("tcp", p.Control[*id])
	if err != nil {
		return err
	}
	fmt.Println("ready")
	return http.Serve(ln, mux)
}

// counter is the state machine: it counts what it applies.
type counter struct{ n atomic.Uint64 }

func (c *counter) Apply(*raft.Log) any { c.n.Add(1); return nil }
func (c *counter) Snapshot() (raft.FSMSnapshot, error) {
	return nil, errors.New("skraft keeps no snapshots")
}
func (c *counter) Restore(io.ReadCloser) error { return errors.New("skraft keeps no snapshots") }

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func getJSON(url string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func saveProfile(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

// cpuOf sums the user and system CPU time of the processes (Linux /proc).
func cpuOf(procs []*exec.Cmd) time.Duration {
	var ticks int64
	for _, c := range procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Process.Pid))
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		u, _ := strconv.ParseInt(fields[11], 10, 64)
		k, _ := strconv.ParseInt(fields[12], 10, 64)
		ticks += u + k
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
