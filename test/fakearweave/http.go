package fakearweave

import (
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// Answers of an Arweave node to POST /tx, as its HTTP interface words them.
const (
	msgInvalidJSON   = "Invalid JSON."
	msgVerification  = "Transaction verification failed."
	msgInvalidAnchor = "Invalid anchor (last_tx)."
	msgAlready       = "Transaction already processed."
	msgTooMany       = "Too Many Requests"
)

func (f *Fake) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /info", f.info)
	m.HandleFunc("GET /tx_anchor", f.anchor)
	m.HandleFunc("GET /price/{bytes}", f.priceOf)
	m.HandleFunc("GET /price/{bytes}/{target}", f.priceOf)
	m.HandleFunc("POST /tx", f.postTx)
	m.HandleFunc("POST /chunk", f.postChunk)
	m.HandleFunc("GET /tx/{id}", f.getTx)
	m.HandleFunc("GET /tx/{id}/status", f.status)
	m.HandleFunc("GET /tx/{id}/data", f.data)
	m.HandleFunc("GET /{id}", f.raw)
	m.HandleFunc("POST /admin/faults", f.adminFaults)
	m.HandleFunc("POST /admin/mine", func(w http.ResponseWriter, _ *http.Request) { f.Mine(); w.WriteHeader(http.StatusNoContent) })
	m.HandleFunc("POST /admin/tamper/{id}", func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if !f.Tamper(r.PathValue("id"), data) {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("GET /admin/mined", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, f.Mined()) })
	f.mux = http.NewServeMux()
	f.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		lat := f.faults.Latency
		f.mu.Unlock()
		if lat > 0 {
			time.Sleep(lat)
		}
		m.ServeHTTP(w, r)
	}))
}

func (f *Fake) info(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"network": "fakearweave", "height": len(f.blocks) - 1,
		"current": b64.EncodeToString(f.blocks[len(f.blocks)-1]), "blocks": len(f.blocks)})
}

func (f *Fake) anchor(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	io.WriteString(w, b64.EncodeToString(f.blocks[len(f.blocks)-1]))
}

func (f *Fake) priceOf(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.PathValue("bytes"))
	if err != nil || n < 0 {
		http.Error(w, "Invalid byte size.", http.StatusBadRequest)
		return
	}
	io.WriteString(w, f.price(n).String())
}

// postTx validates a transaction as a node does, then takes it into the mempool.
func (f *Fake) postTx(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return
	}
	var tx arweave.Tx
	if json.Unmarshal(body, &tx) != nil {
		http.Error(w, msgInvalidJSON, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch roll := f.dice.Float64(); {
	case roll < f.faults.TooMany:
		http.Error(w, msgTooMany, http.StatusTooManyRequests)
		return
	case roll < f.faults.TooMany+f.faults.Unavailable:
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return
	}
	id := tx.IDString()
	if _, ok := f.txs[id]; ok {
		http.Error(w, msgAlready, http.StatusAlreadyReported)
		return
	}
	if tx.Verify() != nil {
		http.Error(w, msgVerification, http.StatusBadRequest)
		return
	}
	if !f.recentBlock(tx.LastTx) {
		http.Error(w, msgInvalidAnchor, http.StatusBadRequest)
		return
	}
	reward, ok := new(big.Int).SetString(tx.Reward, 10)
	if !ok || reward.Cmp(f.price(tx.DataSize)) < 0 || tx.Quantity != "0" && tx.Quantity != "" {
		// A reward under the price, or a transfer (the fake holds no balances): refused
		// as a node refuses an underpaid or overspending transaction.
		http.Error(w, msgVerification, http.StatusBadRequest)
		return
	}
	e := &entry{tx: &tx, height: -1, data: tx.Data}
	if e.data == nil && tx.DataSize > 0 {
		if u, ok := f.chunks[b64.EncodeToString(tx.DataRoot)]; ok && u.complete() {
			e.data = u.data
		}
	}
	f.txs[id] = e
	f.mempool = append(f.mempool, id)
	f.taken = append(f.taken, Taken{ID: id, Tags: tx.Tags, At: time.Now()})
	if f.dice.Float64() < f.faults.DropAfterAccept {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	io.WriteString(w, "OK")
}

// recentBlock reports whether anchor is one of the last AnchorDepth blocks. Caller holds mu.
func (f *Fake) recentBlock(anchor []byte) bool {
	for i := len(f.blocks) - 1; i >= 0 && i >= len(f.blocks)-f.cfg.AnchorDepth; i-- {
		if string(f.blocks[i]) == string(anchor) {
			return true
		}
	}
	return false
}

// postChunk takes a chunk whose data path proves it under its data root.
func (f *Fake) postChunk(w http.ResponseWriter, r *http.Request) {
	var c struct {
		DataRoot, DataSize, DataPath, Offset, Chunk string
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	var raw map[string]string
	if json.Unmarshal(body, &raw) != nil {
		http.Error(w, `{"error":"invalid_json"}`, http.StatusBadRequest)
		return
	}
	c.DataRoot, c.DataSize, c.DataPath, c.Offset, c.Chunk = raw["data_root"], raw["data_size"], raw["data_path"], raw["offset"], raw["chunk"]
	root, err1 := b64.DecodeString(c.DataRoot)
	chunk, err2 := b64.DecodeString(c.Chunk)
	path, err3 := b64.DecodeString(c.DataPath)
	size, err4 := strconv.Atoi(c.DataSize)
	offset, err5 := strconv.Atoi(c.Offset)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || len(chunk) > arweave.MaxChunkSize {
		http.Error(w, `{"error":"invalid_json"}`, http.StatusBadRequest)
		return
	}
	lo, hi, ok := arweave.ValidatePath(root, offset, size, path, chunk)
	if !ok {
		http.Error(w, `{"error":"invalid_proof"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u, found := f.chunks[c.DataRoot]
	if !found {
		u = &upload{size: size, data: make([]byte, size), got: map[int]bool{}}
		f.chunks[c.DataRoot] = u
	}
	copy(u.data[lo:hi], chunk)
	u.got[lo] = true
	if u.complete() {
		for _, e := range f.txs {
			if e.data == nil && b64.EncodeToString(e.tx.DataRoot) == c.DataRoot {
				e.data = u.data
			}
		}
	}
	io.WriteString(w, "OK")
}

// complete reports whether every byte arrived (chunks never overlap: their starts cover it).
func (u *upload) complete() bool {
	n := 0
	for range u.got {
		n++
	}
	return len(arweave.Chunks(make([]byte, u.size))) == n || u.size == 0
}

func (f *Fake) lookup(w http.ResponseWriter, r *http.Request) (*entry, bool) {
	e, ok := f.txs[r.PathValue("id")]
	if !ok {
		http.Error(w, "Not Found.", http.StatusNotFound)
	}
	return e, ok
}

func (f *Fake) status(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.lookup(w, r)
	if !ok {
		return
	}
	if e.height < 0 {
		http.Error(w, "Pending", http.StatusAccepted)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"block_height": e.height, "block_indep_hash": b64.EncodeToString(f.blocks[e.height]),
		"number_of_confirmations": len(f.blocks) - e.height})
}

// getTx answers the header (data not included), pending or mined.
func (f *Fake) getTx(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.lookup(w, r)
	if !ok {
		return
	}
	if e.height < 0 {
		http.Error(w, "Pending", http.StatusAccepted)
		return
	}
	head := *e.tx
	head.Data = nil
	writeJSON(w, http.StatusOK, &head)
}

// data answers the data base64url (GET /tx/{id}/data), raw answers it as bytes (GET /{id}).
func (f *Fake) data(w http.ResponseWriter, r *http.Request) { f.serveData(w, r, true) }
func (f *Fake) raw(w http.ResponseWriter, r *http.Request)  { f.serveData(w, r, false) }

func (f *Fake) serveData(w http.ResponseWriter, r *http.Request, encoded bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.lookup(w, r)
	if !ok {
		return
	}
	if e.data == nil && e.tx.DataSize > 0 {
		http.Error(w, "Not Found.", http.StatusNotFound) // chunks still missing
		return
	}
	if encoded {
		io.WriteString(w, b64.EncodeToString(e.data))
		return
	}
	w.Write(e.data)
}

func (f *Fake) adminFaults(w http.ResponseWriter, r *http.Request) {
	var j struct {
		Latency                                      string
		DropAfterAccept, TooMany, Unavailable, Evict float64
	}
	if err := json.NewDecoder(r.Body).Decode(&j); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var lat time.Duration
	if j.Latency != "" {
		var err error
		if lat, err = time.ParseDuration(j.Latency); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	f.SetFaults(Faults{Latency: lat, DropAfterAccept: j.DropAfterAccept, TooMany: j.TooMany, Unavailable: j.Unavailable, EvictFromMempool: j.Evict})
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
