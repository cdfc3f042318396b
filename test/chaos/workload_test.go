package chaos

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/client"
	"github.com/shardkeeper/shardkeeper/services/device"
	"github.com/shardkeeper/shardkeeper/services/servers"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// attemptTimeout bounds one HTTP attempt (the nodes' request deadline is 2 s).
const attemptTimeout = 3 * time.Second

// Workers per node (each sends its requests through every node in turn).
const (
	nonceWorkersPerNode  = 2
	deviceWorkersPerNode = 1
	serverWorkersPerNode = 1
)

// retryPolicy is the clients' policy in the rolling restart: a 503/429 is retried after its
// Retry-After (plus jitter) on the next node, a connection that could not be made at once on
// the next node, a lost answer only for idempotent requests; a logical request that has no
// definite answer after logicalDeadline failed permanently.
const logicalDeadline = 30 * time.Second

// workload drives the three workloads against a cluster and records their histories.
type workload struct {
	c    *cluster
	t    *testing.T
	seed uint64
	hc   *http.Client
	ids  ClientIDs

	targetsMu sync.Mutex
	targets   []target // the nodes requests go to, round robin; grows when nodes join
	retry     bool     // rolling restart: logical requests are retried (each attempt recorded)

	nonces, challenges, servers *Recorder

	devRegs  []string
	devices  map[string][]deviceKey // registry → devices
	srvRegs  []string
	srvNames []string

	stop chan struct{}
	wg   sync.WaitGroup

	mu         sync.Mutex
	stats      map[string]int // "op outcome" → count
	unexpected []string       // answers no model allows for reasons outside the model (5xx, 400)
	permanent  []permanent    // rolling restart: logical requests that never got an answer
	acked      atomic.Int64   // definite answers (for progress checks)
}

// target is one node the workload sends to, with its client (no retries: every attempt is an
// operation).
type target struct {
	id string
	cl *client.Client
}

type deviceKey struct {
	id   string
	priv ed25519.PrivateKey
}

func newWorkload(c *cluster, seed uint64, retry bool) *workload {
	w := &workload{c: c, t: c.t, seed: seed, retry: retry, stats: map[string]int{}, devices: map[string][]deviceKey{},
		nonces: NewRecorder(c.start), challenges: NewRecorder(c.start), servers: NewRecorder(c.start)}
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second}
	w.hc = &http.Client{Transport: tr}
	for _, n := range c.nodes {
		w.addNode(n)
	}
	c.t.Cleanup(tr.CloseIdleConnections)
	w.setup()
	return w
}

// addNode makes n one of the nodes requests go to.
func (w *workload) addNode(n *proc.Node) {
	cl, err := client.New([]string{"http://" + n.HTTPAddr}, client.WithRetryPolicy(client.NoRetry), client.WithHTTPClient(w.hc))
	if err != nil {
		w.t.Fatal(err)
	}
	w.targetsMu.Lock()
	w.targets = append(w.targets, target{id: n.Config.NodeID, cl: cl})
	w.targetsMu.Unlock()
}

// removeNode stops sending requests to node id.
func (w *workload) removeNode(id string) {
	w.targetsMu.Lock()
	defer w.targetsMu.Unlock()
	w.targets = slices.DeleteFunc(w.targets, func(t target) bool { return t.id == id })
}

// namesIn returns count names "<prefix>-<i>" of kind whose partitions are all different.
func namesIn(kind, prefix string, count int) []string {
	seen := map[uint32]bool{}
	var out []string
	for i := 0; len(out) < count; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		p := actors.PartitionOf(kind, name, partitions)
		if !seen[p] {
			seen[p] = true
			out = append(out, name)
		}
	}
	return out
}

// setup registers the devices (retrying: this is not part of any history).
func (w *workload) setup() {
	tag := fmt.Sprintf("s%d", w.seed)
	w.devRegs = namesIn(device.KindName, "dev-"+tag, 4)
	w.srvRegs = namesIn(servers.KindName, "srv-"+tag, 4)
	w.srvNames = []string{"a", "b", "c"}
	rnd := rand.New(rand.NewPCG(w.seed, 1))
	all := make([]string, len(w.c.nodes))
	for i, n := range w.c.nodes {
		all[i] = "http://" + n.HTTPAddr
	}
	cl, err := client.New(all)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, reg := range w.devRegs {
		for d := range 4 {
			seed := make([]byte, ed25519.SeedSize)
			for i := range seed {
				seed[i] = byte(rnd.UintN(256))
			}
			priv := ed25519.NewKeyFromSeed(seed)
			key := deviceKey{id: fmt.Sprintf("d%d", d), priv: priv}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err := cl.RegisterDevice(ctx, reg, client.RegisterDeviceRequest{DeviceID: key.id, Version: "1",
				Platform: "chaos", BuildHash: "h", PublicKey: priv.Public().(ed25519.PublicKey)})
			cancel()
			if err != nil {
				w.t.Fatalf("register device %s/%s: %v", reg, key.id, err)
			}
			w.devices[reg] = append(w.devices[reg], key)
		}
	}
}

// start runs the workers until stopLoad.
func (w *workload) start() {
	w.stop = make(chan struct{})
	n := len(w.c.nodes)
	k := 0
	spawn := func(count int, fn func(*worker)) {
		for range count {
			wk := &worker{w: w, id: w.ids.New(), rnd: rand.New(rand.NewPCG(w.seed, uint64(k)+100)), next: k}
			k++
			w.wg.Go(func() { fn(wk) })
		}
	}
	spawn(nonceWorkersPerNode*n, (*worker).nonceLoop)
	spawn(deviceWorkersPerNode*n, (*worker).deviceLoop)
	spawn(serverWorkersPerNode*n, (*worker).serverLoop)
}

// stopLoad stops the workers and waits for them.
func (w *workload) stopLoad() {
	close(w.stop)
	w.wg.Wait()
}

func (w *workload) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *workload) count(key string) {
	w.mu.Lock()
	w.stats[key]++
	w.mu.Unlock()
}

func (w *workload) flag(format string, args ...any) {
	w.mu.Lock()
	if len(w.unexpected) < 50 {
		w.unexpected = append(w.unexpected, fmt.Sprintf(format, args...))
	}
	w.mu.Unlock()
}

// worker is one client goroutine: its porcupine client id, its randomness, and its place in
// the round robin over the nodes.
type worker struct {
	w    *workload
	id   int
	rnd  *rand.Rand
	next int
}

func (wk *worker) node() target {
	wk.w.targetsMu.Lock()
	defer wk.w.targetsMu.Unlock()
	t := wk.w.targets[wk.next%len(wk.w.targets)]
	wk.next++
	return t
}

// attempt is one HTTP request's outcome. sent is false when the connection could not be
// made (the request certainly had no effect).
type attempt struct {
	out  Output
	sent bool
	err  error
}

// isDialError reports whether err is a failure to connect: the request never left.
func isDialError(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// classify turns the error of a client call into an Output.
func classify(err error) attempt {
	if err == nil {
		return attempt{out: Output{Status: 200}, sent: true}
	}
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		o := Output{Status: apiErr.Status, Code: apiErr.Code}
		if apiErr.Status >= 500 {
			o.Unknown = true // 503 unavailable: the outcome is unknown (a 500 is flagged too)
		}
		return attempt{out: o, sent: true, err: err}
	}
	if isDialError(err) {
		return attempt{sent: false, err: err}
	}
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = "timeout"
	case strings.HasSuffix(msg, ": EOF"):
		msg = "EOF"
	case strings.Contains(msg, "connection reset"):
		msg = "connection reset"
	}
	return attempt{out: Output{Unknown: true, Err: msg}, sent: true, err: err}
}

// call runs one logical request: fn sends one attempt to node i (0-based) and fills the
// Input's key and the Output's values. Each sent attempt is recorded in rec (unless key is
// still empty: an issue or challenge with no answer concerns no known object). Without
// retries (the default) a logical request is one attempt; in the rolling restart it is
// retried as retryPolicy says. It returns the last attempt's output and whether it was
// definite (an answer other than 5xx/429).
func (wk *worker) call(rec *Recorder, in Input, idempotent bool, fn func(ctx context.Context, cl *client.Client, in *Input, out *Output) error) (Output, bool) {
	w := wk.w
	begin := time.Now()
	for n := 1; ; n++ {
		tg := wk.node()
		in.Node = tg.id
		ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
		call := rec.Now()
		var out Output
		err := fn(ctx, tg.cl, &in, &out)
		ret := rec.Now()
		cancel()
		a := classify(err)
		if err == nil {
			a.out.UsedAt, a.out.LastSeen, a.out.Present = out.UsedAt, out.LastSeen, out.Present
			if out.Status != 0 {
				a.out.Status = out.Status
			}
		}
		outcome := a.out.String()
		if !a.sent {
			outcome = "not sent"
		}
		w.count(in.Op + " " + outcome)
		if a.out.Status >= 500 && a.out.Status != http.StatusServiceUnavailable || a.out.Status == http.StatusBadRequest {
			w.flag("%s %s via %s: %v", in.Op, in.Key, in.Node, a.err)
		}
		if a.sent && in.Key != "" {
			rec.Add(wk.id, in, call, ret, a.out)
			if a.out.Unknown {
				wk.id = w.ids.New() // that operation stays open
			}
		}
		definite := a.sent && !a.out.Unknown && a.out.Status != http.StatusTooManyRequests
		if definite {
			w.acked.Add(1)
			return a.out, true
		}
		if !w.retry {
			return a.out, false
		}
		// The rolling restart's retry policy.
		if a.sent && a.out.Status == 0 && !idempotent {
			w.permanentFailure(true, "%s via %s at %.3fs: outcome unknown and not retryable: %v", in.Op, in.Node, float64(call)/1e9, a.err)
			return a.out, false
		}
		wait := time.Duration(wk.rnd.Int64N(int64(50*time.Millisecond))) + 20*time.Millisecond
		var apiErr *client.APIError
		if errors.As(a.err, &apiErr) && apiErr.RetryAfter > 0 {
			wait += apiErr.RetryAfter
		}
		if time.Since(begin)+wait > logicalDeadline {
			w.permanentFailure(false, "%s %s: no definite answer in %d attempts over %s; last via %s at %.3fs: %v",
				in.Op, in.Key, n, time.Since(begin).Round(time.Millisecond), in.Node, float64(call)/1e9, a.err)
			return a.out, false
		}
		time.Sleep(wait)
	}
}

// permanentFailure records a logical request of the rolling restart that failed for good;
// lostAnswer marks one whose answer was lost on the connection (not retryable).
func (w *workload) permanentFailure(lostAnswer bool, format string, args ...any) {
	w.mu.Lock()
	w.permanent = append(w.permanent, permanent{lostAnswer: lostAnswer, msg: fmt.Sprintf(format, args...)})
	w.mu.Unlock()
}

type permanent struct {
	lostAnswer bool
	msg        string
}

// pace is the pause between two iterations of a worker.
func (wk *worker) pace() {
	time.Sleep(time.Duration(2+wk.rnd.IntN(6)) * time.Millisecond)
}

const org = "chaos"

func (wk *worker) reqID() string { return fmt.Sprintf("w%d-%016x", wk.id, wk.rnd.Uint64()) }

// nonceLoop: issue a nonce; consume it (sometimes two consumers race through two nodes);
// retry a consume whose outcome is unknown with the same request id; replay it with another
// request id; read it.
func (wk *worker) nonceLoop() {
	w := wk.w
	for !w.stopped() {
		wk.pace()
		var nonce string
		if _, ok := wk.call(w.nonces, Input{Op: OpIssue}, true, func(ctx context.Context, cl *client.Client, in *Input, out *Output) error {
			n, err := cl.IssueNonce(ctx, org)
			if err == nil {
				nonce, in.Key = n.Nonce, n.Nonce
				out.Status = http.StatusCreated
			}
			return err
		}); !ok || nonce == "" {
			continue
		}
		req := wk.reqID()
		if wk.rnd.IntN(3) == 0 {
			// Two clients race to consume it through different nodes.
			other := &worker{w: w, id: w.ids.New(), rnd: rand.New(rand.NewPCG(wk.rnd.Uint64(), 7)), next: wk.next + 1}
			var wg sync.WaitGroup
			wg.Go(func() { wk.consume(nonce, req) })
			wg.Go(func() { other.consume(nonce, other.reqID()) })
			wg.Wait()
			wk.next++
		} else {
			out, ok := wk.consume(nonce, req)
			for try := 0; !ok && out.Unknown && try < 3 && !w.stopped(); try++ {
				out, ok = wk.consume(nonce, req) // same request id: idempotent retry
			}
		}
		if wk.rnd.IntN(3) == 0 {
			wk.consume(nonce, wk.reqID()) // a replay: 409 once used
		}
		if wk.rnd.IntN(2) == 0 {
			wk.getNonce(nonce)
		}
	}
}

func (wk *worker) consume(nonce, req string) (Output, bool) {
	return wk.call(wk.w.nonces, Input{Op: OpConsume, Key: nonce, RequestID: req}, true,
		func(ctx context.Context, cl *client.Client, in *Input, out *Output) error {
			c, err := cl.ConsumeNonce(ctx, nonce, client.ConsumeRequest{OrgID: org, RequestID: req})
			if err == nil {
				out.UsedAt = c.UsedAt
			}
			return err
		})
}

func (wk *worker) getNonce(nonce string) (Output, bool) {
	return wk.call(wk.w.nonces, Input{Op: OpGet, Key: nonce}, true,
		func(ctx context.Context, cl *client.Client, in *Input, out *Output) error {
			n, err := cl.GetNonce(ctx, nonce)
			if err == nil && n.UsedAt != nil {
				out.UsedAt = *n.UsedAt
			}
			return err
		})
}

// deviceLoop: challenge a device; verify (sometimes with a bad signature, sometimes two
// verifies racing through two nodes); sometimes replay the verify.
func (wk *worker) deviceLoop() {
	w := wk.w
	for !w.stopped() {
		wk.pace()
		reg := w.devRegs[wk.rnd.IntN(len(w.devRegs))]
		dev := w.devices[reg][wk.rnd.IntN(len(w.devices[reg]))]
		var nonce string
		_, ok := wk.call(w.challenges, Input{Op: OpChallenge}, true, func(ctx context.Context, cl *client.Client, in *Input, out *Output) error {
			ch, err := cl.Challenge(ctx, reg, dev.id)
			if err == nil {
				nonce = ch.Nonce
				in.Key = reg + "/" + dev.id + "/" + ch.Nonce
			}
			return err
		})
		if !ok || nonce == "" {
			continue
		}
		switch r := wk.rnd.IntN(8); {
		case r == 0:
			wk.verify(reg, dev, nonce, false)
		case r <= 2:
			other := &worker{w: w, id: w.ids.New(), rnd: rand.New(rand.NewPCG(wk.rnd.Uint64(), 9)), next: wk.next + 1}
			var wg sync.WaitGroup
			wg.Go(func() { wk.verify(reg, dev, nonce, true) })
			wg.Go(func() { other.verify(reg, dev, nonce, true) })
			wg.Wait()
			wk.next++
		default:
			wk.verify(reg, dev, nonce, true)
		}
		if wk.rnd.IntN(3) == 0 {
			wk.verify(reg, dev, nonce, true) // a replay: 409
		}
	}
}

func (wk *worker) verify(reg string, dev deviceKey, nonce string, valid bool) (Output, bool) {
	sig := client.SignNonce(dev.priv, nonce)
	if !valid {
		sig = client.SignNonce(dev.priv, nonce+"x")
	}
	// One request_id per logical verify: a retry after a lost answer gets the first outcome.
	req := wk.reqID()
	return wk.call(wk.w.challenges, Input{Op: OpVerify, Key: reg + "/" + dev.id + "/" + nonce, ValidSig: valid, RequestID: req}, true,
		func(ctx context.Context, cl *client.Client, in *Input, out *Output) error {
			_, err := cl.Verify(ctx, reg, client.VerifyRequest{DeviceID: dev.id, Nonce: nonce, Signature: sig, RequestID: req})
			return err
		})
}

// serverLoop: heartbeat a server (PUT) or list a registry; a list is recorded as one read
// per server of the registry.
func (wk *worker) serverLoop() {
	w := wk.w
	for !w.stopped() {
		wk.pace()
		reg := w.srvRegs[wk.rnd.IntN(len(w.srvRegs))]
		if wk.rnd.IntN(2) == 0 {
			wk.putServer(reg, w.srvNames[wk.rnd.IntN(len(w.srvNames))])
		} else {
			wk.listServers(reg)
		}
	}
}

func (wk *worker) putServer(reg, name string) (Output, bool) {
	return wk.call(wk.w.servers, Input{Op: OpPut, Key: reg + "/" + name}, true,
		func(ctx context.Context, cl *client.Client, in *Input, out *Output) error {
			hb, err := cl.PutServer(ctx, reg, name, client.PutServerRequest{Address: "10.0.0.1:1"})
			if err == nil {
				out.LastSeen = hb.LastSeen
				out.Status = http.StatusOK
				if hb.Created {
					out.Status = http.StatusCreated
				}
			}
			return err
		})
}

// listServers lists reg and records what it showed of each server as an OpList of that
// server (same call and return times). Attempts with no answer are left out: a read that
// returned nothing has no effect.
func (wk *worker) listServers(reg string) {
	w := wk.w
	var got []client.Server
	attempts := NewRecorder(w.c.start)
	wk.call(attempts, Input{Op: OpList, Key: reg}, true, func(ctx context.Context, cl *client.Client, in *Input, out *Output) error {
		var err error
		got, err = cl.ListServers(ctx, reg)
		return err
	})
	for _, op := range attempts.Ops() {
		o, in := op.Output.(Output), op.Input.(Input)
		if o.Unknown {
			continue
		}
		for _, name := range w.srvNames {
			po := o
			if o.Status == http.StatusOK { // only the last attempt can have succeeded
				if i := slices.IndexFunc(got, func(s client.Server) bool { return s.ServerID == name }); i >= 0 {
					po.Present, po.LastSeen = true, got[i].LastSeen
				}
			}
			w.servers.Add(op.ClientId, Input{Op: OpList, Key: reg + "/" + name, Node: in.Node}, op.Call, op.Return, po)
		}
	}
}

// statsLine summarizes the outcomes of the operations sent.
func (w *workload) statsLine() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.stats))
	for k := range w.stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %d; ", k, w.stats[k])
	}
	return strings.TrimSuffix(b.String(), "; ")
}
