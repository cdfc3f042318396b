package fakenear

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// The admin API, for tests in other processes (see README.md):
//
//	GET    /fake/status            head, final block, pool size, endpoints
//	GET    /fake/ledger            the ledger; ?kind=&signer_id=&public_key=&hash=&after_seq=
//	GET    /fake/faults            every endpoint's faults
//	PUT    /fake/faults            set faults: {"endpoint"?,"latency"?,"jitter"?,"rules":[…]}
//	DELETE /fake/faults            clear every endpoint's faults
//	POST   /fake/nonce-bump        {"account_id","public_key","nonce"?}: a foreign sender's tx
//	POST   /fake/accounts          an Account: {"account_id","balance","keys":[…]}
//	POST   /fake/keys              {"account_id","public_key","permission"?,"nonce"?}
//	POST   /fake/blocks            {"count"?}: produce blocks now
//
// Errors are {"error":"…"} with 400 (bad request), 404 (unknown endpoint) or 409 (exists).
func (f *Fake) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /fake/status", f.adminStatus)
	mux.HandleFunc("GET /fake/ledger", f.adminLedger)
	mux.HandleFunc("GET /fake/faults", f.adminGetFaults)
	mux.HandleFunc("PUT /fake/faults", f.adminSetFaults)
	mux.HandleFunc("POST /fake/faults", f.adminSetFaults)
	mux.HandleFunc("DELETE /fake/faults", f.adminClearFaults)
	mux.HandleFunc("POST /fake/nonce-bump", f.adminBumpNonce)
	mux.HandleFunc("POST /fake/accounts", f.adminAddAccount)
	mux.HandleFunc("POST /fake/keys", f.adminAddKey)
	mux.HandleFunc("POST /fake/blocks", f.adminBlocks)
	return mux
}

func adminError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// readBody decodes a JSON body into v; an empty body leaves v as it is.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && len(data) > 0 {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		adminError(w, http.StatusBadRequest, fmt.Errorf("body: %w", err))
		return false
	}
	return true
}

// StatusInfo is GET /fake/status.
type StatusInfo struct {
	ChainID        string         `json:"chain_id"`
	Height         uint64         `json:"height"`
	Hash           string         `json:"hash"`
	FinalHeight    uint64         `json:"final_height"`
	FinalHash      string         `json:"final_hash"`
	Pool           int            `json:"pool"`
	Forwarding     int            `json:"forwarding"`
	ValidityPeriod uint64         `json:"validity_period"`
	Endpoints      []EndpointInfo `json:"endpoints"`
}

// EndpointInfo describes one endpoint in GET /fake/status.
type EndpointInfo struct {
	Name               string `json:"name"`
	URL                string `json:"url"`
	ForwardDelayBlocks uint64 `json:"forward_delay_blocks"`
}

func (f *Fake) adminStatus(w http.ResponseWriter, _ *http.Request) {
	c := f.chain
	c.mu.Lock()
	s := StatusInfo{
		ChainID: f.cfg.ChainID, Height: c.head().height, Hash: c.head().hash.String(),
		FinalHeight: c.final().height, FinalHash: c.final().hash.String(),
		Pool: c.pool.size(), Forwarding: len(c.forwards), ValidityPeriod: f.cfg.ValidityPeriod,
	}
	c.mu.Unlock()
	for _, e := range f.Endpoints() {
		s.Endpoints = append(s.Endpoints, EndpointInfo{Name: e.name, URL: e.URL(), ForwardDelayBlocks: e.forwardDelay})
	}
	writeJSON(w, http.StatusOK, s)
}

func (f *Fake) adminLedger(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, _ := strconv.ParseUint(q.Get("after_seq"), 10, 64)
	entries := []LedgerEntry{}
	for _, e := range f.Ledger() {
		if e.Seq <= after ||
			q.Get("kind") != "" && string(e.Kind) != q.Get("kind") ||
			q.Get("signer_id") != "" && e.Signer != q.Get("signer_id") ||
			q.Get("public_key") != "" && e.PublicKey != q.Get("public_key") ||
			q.Get("hash") != "" && e.Hash != q.Get("hash") {
			continue
		}
		entries = append(entries, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

// FaultsJSON is the wire form of an endpoint's Faults in the admin API: durations as Go
// duration strings ("50ms").
type FaultsJSON struct {
	Endpoint string      `json:"endpoint,omitempty"`
	Latency  string      `json:"latency,omitempty"`
	Jitter   string      `json:"jitter,omitempty"`
	Rules    []FaultRule `json:"rules"`
}

// Faults converts the wire form.
func (j FaultsJSON) Faults() (Faults, error) {
	fs := Faults{Rules: j.Rules}
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{j.Latency, &fs.Latency}, {j.Jitter, &fs.Jitter}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil {
			return Faults{}, fmt.Errorf("fakenear: faults: %w", err)
		}
		*d.dst = v
	}
	return fs, fs.check()
}

func faultsJSON(name string, fs Faults) FaultsJSON {
	j := FaultsJSON{Endpoint: name, Rules: fs.Rules}
	if fs.Latency > 0 {
		j.Latency = fs.Latency.String()
	}
	if fs.Jitter > 0 {
		j.Jitter = fs.Jitter.String()
	}
	if j.Rules == nil {
		j.Rules = []FaultRule{}
	}
	return j
}

func (f *Fake) adminGetFaults(w http.ResponseWriter, _ *http.Request) {
	out := []FaultsJSON{}
	for _, e := range f.Endpoints() {
		out = append(out, faultsJSON(e.name, e.Faults()))
	}
	writeJSON(w, http.StatusOK, map[string]any{"endpoints": out})
}

func (f *Fake) adminSetFaults(w http.ResponseWriter, r *http.Request) {
	var j FaultsJSON
	if !readBody(w, r, &j) {
		return
	}
	fs, err := j.Faults()
	if err != nil {
		adminError(w, http.StatusBadRequest, err)
		return
	}
	targets := f.Endpoints()
	if j.Endpoint != "" {
		e := f.Endpoint(j.Endpoint)
		if e == nil {
			adminError(w, http.StatusNotFound, fmt.Errorf("no endpoint %q", j.Endpoint))
			return
		}
		targets = []*Endpoint{e}
	}
	for _, e := range targets {
		if err := e.SetFaults(fs); err != nil {
			adminError(w, http.StatusBadRequest, err)
			return
		}
	}
	f.adminGetFaults(w, r)
}

func (f *Fake) adminClearFaults(w http.ResponseWriter, r *http.Request) {
	for _, e := range f.Endpoints() {
		_ = e.SetFaults(Faults{}) // empty faults always pass the check
	}
	f.adminGetFaults(w, r)
}

func (f *Fake) adminBumpNonce(w http.ResponseWriter, r *http.Request) {
	var p struct {
		AccountID string         `json:"account_id"`
		PublicKey near.PublicKey `json:"public_key"`
		Nonce     uint64         `json:"nonce"`
	}
	if !readBody(w, r, &p) {
		return
	}
	h, err := f.BumpNonce(p.AccountID, p.PublicKey, p.Nonce)
	if err != nil {
		adminError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"hash": h.String()})
}

func (f *Fake) adminAddAccount(w http.ResponseWriter, r *http.Request) {
	var a Account
	if !readBody(w, r, &a) {
		return
	}
	if err := f.AddAccount(a); err != nil {
		status := http.StatusBadRequest
		if _, exists := f.Balance(a.ID); exists {
			status = http.StatusConflict
		}
		adminError(w, status, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

func (f *Fake) adminAddKey(w http.ResponseWriter, r *http.Request) {
	var p struct {
		AccountID string `json:"account_id"`
		AccountKey
	}
	if !readBody(w, r, &p) {
		return
	}
	if err := f.AddKey(p.AccountID, p.AccountKey); err != nil {
		status := http.StatusBadRequest
		if _, exists := f.AccessKeyNonce(p.AccountID, p.PublicKey); exists {
			status = http.StatusConflict
		}
		adminError(w, status, err)
		return
	}
	writeJSON(w, http.StatusCreated, p)
}

func (f *Fake) adminBlocks(w http.ResponseWriter, r *http.Request) {
	p := struct {
		Count int `json:"count"`
	}{Count: 1}
	if !readBody(w, r, &p) {
		return
	}
	if p.Count < 0 || p.Count > 10000 {
		adminError(w, http.StatusBadRequest, fmt.Errorf("count %d is not 0..10000", p.Count))
		return
	}
	b := f.StepN(p.Count)
	writeJSON(w, http.StatusOK, map[string]any{"height": b.Height, "hash": b.Hash.String()})
}
