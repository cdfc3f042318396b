// Command skfloor is the benchmark's calibration server: the least an HTTP service can do
// to answer the nonce oracle's two requests on this machine. It is not part of shardkeeper
// and holds none of its guarantees.
//
// It serves POST /v1/nonces and POST /v1/nonces/{nonce}/consume with the contract's bodies,
// statuses and error codes, decoding requests with shardkeeper's own api.DecodeJSON, and keeps
// nonces in one Pebble store: issue is one Set, consume a Get and a Set under a per-key lock.
// With --durable (the default) every Set is fsynced before the reply (Pebble group-commits
// concurrent writers), as Redis with appendfsync always does. With --durable=false nothing
// is written at all: what is left is net/http and JSON.
//
// There is no Raft, no actor runtime, no expiry alarms, no replicas and no fail-closed
// deadline. skbench runs it next to shardkeeper and Redis so that a run shows how much of the
// gap to Redis is the machine (HTTP and fsync on these cores) and how much is shardkeeper.
//
// Usage: skfloor --addr 127.0.0.1:8090 --dir /tmp/floor [--durable=false]
package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/shardkeeper/shardkeeper/api"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "HTTP listen address")
	dir := flag.String("dir", "", "Pebble directory (required with --durable)")
	durable := flag.Bool("durable", true, "store every nonce with an fsynced write; false: store nothing")
	ttl := flag.Duration("ttl", time.Hour, "nonce lifetime")
	flag.Parse()
	if err := run(*addr, *dir, *durable, *ttl); err != nil {
		fmt.Fprintln(os.Stderr, "skfloor:", err)
		os.Exit(1)
	}
}

func run(addr, dir string, durable bool, ttl time.Duration) error {
	var db *pebble.DB
	if durable {
		if dir == "" {
			return errors.New("--dir is required with --durable")
		}
		var err error
		if db, err = pebble.Open(dir, &pebble.Options{MemTableSize: 64 << 20}); err != nil {
			return fmt.Errorf("open pebble in %s: %w", dir, err)
		}
		defer db.Close()
	}
	slog.Info("skfloor serving", "addr", addr, "durable", durable)
	return http.ListenAndServe(addr, newFloor(db, ttl).handler())
}

// floor is the calibration server's state. With db nil, issue stores nothing and consume
// accepts any nonce once per call (nothing is remembered).
type floor struct {
	db    *pebble.DB
	ttl   time.Duration
	seed  maphash.Seed
	locks [256]sync.Mutex // consume's Get+Set is atomic per nonce (striped)
}

func newFloor(db *pebble.DB, ttl time.Duration) *floor {
	return &floor{db: db, ttl: ttl, seed: maphash.MakeSeed()}
}

func (f *floor) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /v1/nonces", f.issue)
	mux.HandleFunc("POST /v1/nonces/{nonce}/consume", f.consume)
	return mux
}

// record is a stored nonce: "<expires unix ms> <org>" while unused, with " <request id>"
// appended once consumed.
func (f *floor) issue(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OrgID string `json:"org_id"`
	}
	if e := api.DecodeJSON(r, &req); e != nil {
		api.WriteError(w, e)
		return
	}
	if req.OrgID == "" || strings.ContainsRune(req.OrgID, ' ') {
		api.WriteError(w, api.Errorf(http.StatusBadRequest, "invalid_request", "org_id is required and has no spaces"))
		return
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	nonce := base64.RawURLEncoding.EncodeToString(b[:])
	now := time.Now().UnixMilli()
	exp := now + f.ttl.Milliseconds()
	if f.db != nil {
		if err := f.db.Set([]byte(nonce), fmt.Appendf(nil, "%d %s", exp, req.OrgID), pebble.Sync); err != nil {
			api.WriteError(w, err)
			return
		}
	}
	api.WriteJSON(w, http.StatusCreated, map[string]any{"nonce": nonce, "org_id": req.OrgID, "issued_at": now, "expires_at": exp})
}

func (f *floor) consume(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OrgID     string `json:"org_id"`
		RequestID string `json:"request_id"`
	}
	if e := api.DecodeJSON(r, &req); e != nil {
		api.WriteError(w, e)
		return
	}
	nonce := r.PathValue("nonce")
	now := time.Now().UnixMilli()
	if f.db != nil {
		mu := &f.locks[maphash.String(f.seed, nonce)%uint64(len(f.locks))]
		mu.Lock()
		e := f.consumeLocked(nonce, req.OrgID, req.RequestID, now)
		mu.Unlock()
		if e != nil {
			api.WriteError(w, e)
			return
		}
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"nonce": nonce, "used_at": now})
}

// consumeLocked checks and marks nonce used, as the contract orders the outcomes.
func (f *floor) consumeLocked(nonce, org, requestID string, now int64) error {
	v, closer, err := f.db.Get([]byte(nonce))
	if errors.Is(err, pebble.ErrNotFound) {
		return api.Errorf(http.StatusNotFound, "unknown_nonce", "nonce was never issued")
	}
	if err != nil {
		return err
	}
	fields := strings.Fields(string(v))
	_ = closer.Close()
	var exp int64
	if len(fields) < 2 {
		return fmt.Errorf("nonce %s: corrupt record", nonce)
	}
	_, _ = fmt.Sscan(fields[0], &exp)
	switch {
	case len(fields) == 3 && requestID != "" && fields[2] == requestID:
		return nil
	case len(fields) == 3:
		return api.Errorf(http.StatusConflict, "nonce_used", "nonce already used")
	case now >= exp:
		return api.Errorf(http.StatusGone, "nonce_expired", "nonce expired")
	case fields[1] != org:
		return api.Errorf(http.StatusForbidden, "org_mismatch", "nonce of another organisation")
	}
	if requestID == "" {
		requestID = "-"
	}
	return f.db.Set([]byte(nonce), fmt.Appendf(nil, "%d %s %s", exp, org, requestID), pebble.Sync)
}
