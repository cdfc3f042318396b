package fakenear

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// FaultKind names a fault an endpoint injects into a JSON-RPC request.
type FaultKind string

// The faults.
const (
	// FaultDropResponse handles the request fully (a transaction is applied, a send_tx waits
	// for its level), then closes the connection without answering.
	FaultDropResponse FaultKind = "drop_response"
	// FaultStatus answers HTTP Status (408 or 503, or another 4xx/5xx) instead of the JSON-RPC
	// answer: without handling the request, or, with After, after handling it.
	FaultStatus FaultKind = "status"
	// FaultTimeout answers nearcore's TIMEOUT_ERROR; a transaction sent is accepted all the
	// same and lands.
	FaultTimeout FaultKind = "timeout"
	// FaultLose accepts a transaction (a send_tx that waits then times out) and loses it: it
	// never lands and `tx` does not know it, as NEAR may drop a transaction sent with NONE.
	FaultLose FaultKind = "lose"
	// FaultForeignNonce has a foreign sender of the transaction's key take its nonce first: a
	// transaction of the same key and nonce enters the pool just before it, so the one sent
	// never lands (dropped: InvalidNonce).
	FaultForeignNonce FaultKind = "foreign_nonce"
	// FaultLie answers as a node that has never seen the transaction, whatever happened to it:
	// a status query gets UNKNOWN_TRANSACTION, or with the signed bytes the refusal a fresh
	// check gives (InvalidNonce once the nonce was used, by this transaction landing too); a
	// send gets that refusal even with wait_until NONE, and is not passed on. A hostile,
	// intercepted or badly broken node: only another node can contradict it.
	FaultLie FaultKind = "lie"
)

// submitMethods are the methods that send a transaction: the only ones FaultLose and
// FaultForeignNonce apply to.
var submitMethods = []string{"send_tx", "broadcast_tx_async", "broadcast_tx_commit"}

// FaultRule injects one fault into matching requests: into each of the Next matching requests
// first, then into each further one with probability Rate.
type FaultRule struct {
	Kind FaultKind `json:"kind"`
	// Status is the HTTP status of FaultStatus (default 503); After answers it after handling
	// the request rather than instead of handling it.
	Status int  `json:"status,omitempty"`
	After  bool `json:"after,omitempty"`
	// Rate is the probability (0..1) that a matching request gets the fault.
	Rate float64 `json:"rate,omitempty"`
	// Next counts the next matching requests that get it, whatever Rate.
	Next int `json:"next,omitempty"`
	// Methods limits the rule to these JSON-RPC methods; empty: every method (for lose and
	// foreign_nonce: every method that sends a transaction).
	Methods []string `json:"methods,omitempty"`
}

// Faults are the faults of an endpoint.
type Faults struct {
	// Latency is the one-way network delay each direction of every connection adds; Jitter a
	// random extra delay up to it. Bytes of one connection keep their order (a delay line), so
	// requests written on one connection arrive in the order written, while requests on
	// different connections may arrive in another order.
	Latency time.Duration `json:"-"`
	Jitter  time.Duration `json:"-"`
	Rules   []FaultRule   `json:"rules,omitempty"`
}

func (f Faults) check() error {
	if f.Latency < 0 || f.Jitter < 0 {
		return errors.New("fakenear: latency and jitter must not be negative")
	}
	for i, r := range f.Rules {
		switch r.Kind {
		case FaultDropResponse, FaultTimeout, FaultLose, FaultForeignNonce, FaultLie:
		case FaultStatus:
			if r.Status != 0 && (r.Status < 400 || r.Status > 599) {
				return fmt.Errorf("fakenear: fault rule %d: status %d is not a 4xx or 5xx", i, r.Status)
			}
		default:
			return fmt.Errorf("fakenear: fault rule %d: unknown kind %q", i, r.Kind)
		}
		if r.Rate < 0 || r.Rate > 1 || r.Next < 0 {
			return fmt.Errorf("fakenear: fault rule %d: rate must be in [0,1] and next not negative", i)
		}
	}
	return nil
}

// decision is the fault chosen for one request.
type decision struct {
	kind   FaultKind // "" for none
	status int
	after  bool
}

// faultState holds an endpoint's faults and the seeded randomness that applies them.
type faultState struct {
	mu     sync.Mutex
	faults Faults
	rng    *rand.Rand
}

func newFaultState(seed uint64) *faultState {
	return &faultState{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (s *faultState) set(f Faults) error {
	if err := f.check(); err != nil {
		return err
	}
	f.Rules = slices.Clone(f.Rules)
	for i := range f.Rules {
		f.Rules[i].Methods = slices.Clone(f.Rules[i].Methods)
	}
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
	return nil
}

func (s *faultState) get() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults
	f.Rules = slices.Clone(f.Rules)
	return f
}

// decide picks the fault of a request to method: the first rule that matches and fires. A rule
// whose Next count runs out and that has no Rate is removed.
func (s *faultState) decide(method string) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	submit := slices.Contains(submitMethods, method)
	for i := 0; i < len(s.faults.Rules); i++ {
		r := &s.faults.Rules[i]
		if (r.Kind == FaultLose || r.Kind == FaultForeignNonce) && !submit {
			continue
		}
		if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
			continue
		}
		fire := false
		if r.Next > 0 {
			r.Next--
			fire = true
		} else if r.Rate > 0 && s.rng.Float64() < r.Rate {
			fire = true
		}
		if !fire {
			continue
		}
		d := decision{kind: r.Kind, status: r.Status, after: r.After}
		if d.kind == FaultStatus && d.status == 0 {
			d.status = 503
		}
		if r.Next == 0 && r.Rate == 0 {
			s.faults.Rules = slices.Delete(s.faults.Rules, i, i+1) // spent (r is invalid now)
		}
		return d
	}
	return decision{}
}

// delay returns the one-way delay of the next chunk of bytes: Latency plus a uniform sample of
// Jitter.
func (s *faultState) delay() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.faults.Latency
	if j := s.faults.Jitter; j > 0 {
		d += time.Duration(s.rng.Int64N(int64(j) + 1))
	}
	return d
}
