package fakenear

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// Fake is a fake NEAR node: one chain, any number of RPC endpoints. Its methods are safe for
// concurrent use.
type Fake struct {
	cfg   Config
	chain *chain
	log   *slog.Logger
	admin http.Handler

	mu        sync.Mutex
	endpoints []*Endpoint
	closed    bool

	stop chan struct{}
	done chan struct{} // closed when the block producer has stopped
}

// New builds a fake with its genesis block and starts producing blocks (unless cfg.Manual).
// It serves nothing until Listen.
func New(cfg Config) (*Fake, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := newChain(cfg)
	if err != nil {
		return nil, err
	}
	f := &Fake{cfg: cfg, chain: c, log: cfg.Logger, stop: make(chan struct{}), done: make(chan struct{})}
	f.admin = f.adminHandler()
	if cfg.Manual {
		close(f.done)
	} else {
		go f.produce()
	}
	return f, nil
}

func (f *Fake) produce() {
	defer close(f.done)
	t := time.NewTicker(f.cfg.BlockInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			f.chain.produce()
		case <-f.stop:
			return
		}
	}
}

// Config returns the configuration in effect (defaults filled in).
func (f *Fake) Config() Config { return f.cfg }

// Step produces one block now, also when blocks are produced on their own, and returns it.
func (f *Fake) Step() BlockInfo { return f.chain.produce() }

// StepN produces n blocks and returns the last (the head when n is 0).
func (f *Fake) StepN(n int) BlockInfo {
	b := f.Head()
	for range n {
		b = f.Step()
	}
	return b
}

// Head returns the head block: what finality "optimistic" answers.
func (f *Fake) Head() BlockInfo {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	return f.chain.head().info()
}

// Final returns the last final block: what finality "final" answers.
func (f *Fake) Final() BlockInfo {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	return f.chain.final().info()
}

// AddAccount creates an account, visible at once at every finality (as if from genesis).
func (f *Fake) AddAccount(a Account) error {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	return f.chain.addAccount(a)
}

// AddKey installs an access key on an existing account, visible at once at every finality.
func (f *Fake) AddKey(accountID string, k AccountKey) error {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	return f.chain.addKey(accountID, k)
}

// AccessKeyNonce returns the nonce of an access key at the head, and whether the key exists.
func (f *Fake) AccessKeyNonce(accountID string, pk near.PublicKey) (uint64, bool) {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	if k := f.chain.head().state.key(accountID, pk); k != nil {
		return k.nonce, true
	}
	return 0, false
}

// Balance returns an account's balance at the head, and whether the account exists.
func (f *Fake) Balance(accountID string) (near.U128, bool) {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	if a := f.chain.head().state.accounts[accountID]; a != nil {
		return u128(a.balance), true
	}
	return near.U128{}, false
}

// BumpNonce has a foreign sender of the key land a transaction with the given nonce in the next
// block (nonce 0: the key's nonce + 1 at that block), as another process holding the same key
// would. It returns the foreign transaction's (synthetic) hash; the ledger shows it Foreign.
func (f *Fake) BumpNonce(accountID string, pk near.PublicKey, nonce uint64) (near.Hash, error) {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	if f.chain.head().state.key(accountID, pk) == nil {
		return near.Hash{}, fmt.Errorf("fakenear: account %s has no key %s", accountID, pk)
	}
	return f.chain.addForeign(accountID, pk, nonce), nil
}

// Ledger returns every ledger entry so far, in order.
func (f *Fake) Ledger() []LedgerEntry {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	return slices.Clone(f.chain.ledger)
}

// LedgerSince returns the ledger entries after the first n, in order: a reader that keeps
// count takes only what is new.
func (f *Fake) LedgerSince(n int) []LedgerEntry {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	if n >= len(f.chain.ledger) {
		return nil
	}
	return slices.Clone(f.chain.ledger[n:])
}

// LedgerOf returns the ledger entries of one transaction hash, in order.
func (f *Fake) LedgerOf(hash near.Hash) []LedgerEntry {
	var out []LedgerEntry
	for _, e := range f.Ledger() {
		if e.Hash == hash.String() {
			out = append(out, e)
		}
	}
	return out
}

// Pending reports whether a transaction is waiting for a block: in the pool or held by a late
// endpoint.
func (f *Fake) Pending(hash near.Hash) bool {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	return f.chain.pool.has(hash) || f.chain.forwarding(hash)
}

// PoolSize returns how many transactions are in the pool (not counting late endpoints').
func (f *Fake) PoolSize() int {
	f.chain.mu.Lock()
	defer f.chain.mu.Unlock()
	return f.chain.pool.size()
}

// SetFaults sets the faults of every endpoint (each keeps its own counters and randomness).
func (f *Fake) SetFaults(fs Faults) error {
	if err := fs.check(); err != nil {
		return err
	}
	for _, e := range f.Endpoints() {
		if err := e.SetFaults(fs); err != nil {
			return err
		}
	}
	return nil
}

// Endpoints returns the endpoints in the order they were started.
func (f *Fake) Endpoints() []*Endpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.endpoints)
}

// Endpoint returns the endpoint named name, or nil.
func (f *Fake) Endpoint(name string) *Endpoint {
	for _, e := range f.Endpoints() {
		if e.name == name {
			return e
		}
	}
	return nil
}

// AdminHandler serves the /fake/ admin endpoints alone, for a listener of their own (every RPC
// endpoint serves them too).
func (f *Fake) AdminHandler() http.Handler { return f.admin }

// EndpointConfig configures an RPC endpoint.
type EndpointConfig struct {
	// Name identifies the endpoint in the ledger and the admin API; default "rpc<N>".
	Name string
	// ForwardDelayBlocks makes the endpoint hand the transactions it accepts to the pool only
	// when the block that many blocks after the next one is produced, as an RPC node that
	// forwards to validators late would: a transaction sent to it may be overtaken by one sent
	// later to another endpoint.
	ForwardDelayBlocks uint64
	// Faults are the endpoint's initial faults.
	Faults Faults
}

// Endpoint is one RPC endpoint of the fake: an HTTP server over the shared chain, with its own
// faults.
type Endpoint struct {
	fake         *Fake
	name         string
	forwardDelay uint64
	faults       *faultState
	srv          *http.Server
	addr         string
}

// Listen starts an RPC endpoint on addr (host:port; port 0 picks a free one).
func (f *Fake) Listen(addr string, ec EndpointConfig) (*Endpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errors.New("fakenear: closed")
	}
	if ec.Name == "" {
		ec.Name = fmt.Sprintf("rpc%d", len(f.endpoints))
	}
	for _, e := range f.endpoints {
		if e.name == ec.Name {
			return nil, fmt.Errorf("fakenear: endpoint %s exists", ec.Name)
		}
	}
	fs := newFaultState(f.cfg.Seed + uint64(len(f.endpoints))*0x1000193)
	if err := fs.set(ec.Faults); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakenear: listen %s: %w", addr, err)
	}
	e := &Endpoint{fake: f, name: ec.Name, forwardDelay: ec.ForwardDelayBlocks, faults: fs, addr: ln.Addr().String()}
	e.srv = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: time.Minute,
		ErrorLog:          slog.NewLogLogger(f.log.Handler(), slog.LevelDebug),
	}
	go func() {
		if err := e.srv.Serve(&delayListener{Listener: ln, delay: fs.delay}); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.log.Error("fakenear: endpoint stopped", "endpoint", e.name, "err", err)
		}
	}()
	f.endpoints = append(f.endpoints, e)
	f.log.Info("fakenear: endpoint listening", "endpoint", e.name, "url", e.URL(), "forward_delay_blocks", e.forwardDelay)
	return e, nil
}

// Name returns the endpoint's name.
func (e *Endpoint) Name() string { return e.name }

// Addr returns the address the endpoint listens on.
func (e *Endpoint) Addr() string { return e.addr }

// URL returns the endpoint's JSON-RPC URL.
func (e *Endpoint) URL() string { return "http://" + e.addr + "/" }

// SetFaults replaces the endpoint's faults.
func (e *Endpoint) SetFaults(fs Faults) error { return e.faults.set(fs) }

// Faults returns the endpoint's faults (with the Next counts left).
func (e *Endpoint) Faults() Faults { return e.faults.get() }

// Close stops block production and every endpoint. Requests waiting for a block end with
// TIMEOUT_ERROR, or without an answer when their connection closes first.
func (f *Fake) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	eps := f.endpoints
	f.mu.Unlock()
	if !f.cfg.Manual {
		close(f.stop)
	}
	<-f.done
	f.chain.close()
	var errs []error
	for _, e := range eps {
		if err := e.srv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("fakenear: close %s: %w", e.name, err))
		}
	}
	return errors.Join(errs...)
}
