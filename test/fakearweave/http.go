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
	m.HandleFunc("GET /block/height/{height}", f.getBlock)
	m.HandleFunc("GET /block/hash/{hash}", f.getBlock)
	m.HandleFunc("GET /{id}", f.raw)
	m.HandleFunc("GET /raw/{id}", f.raw)
	m.HandleFunc("POST /graphql", f.graphql)
	admin := http.NewServeMux()
	admin.HandleFunc("POST /admin/faults", f.adminFaults)
	admin.HandleFunc("POST /admin/mine", func(w http.ResponseWriter, _ *http.Request) { f.Mine(); w.WriteHeader(http.StatusNoContent) })
	admin.HandleFunc("POST /admin/reorg", f.adminReorg)
	admin.HandleFunc("POST /admin/tamper/{id}", func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if !f.Tamper(r.PathValue("id"), data) {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	admin.HandleFunc("GET /admin/mined", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, f.Mined()) })
	admin.HandleFunc("GET /admin/bundles/{id}", f.adminBundle)
	f.mux = http.NewServeMux()
	f.mux.Handle("/admin/", admin)
	f.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !f.wait(r) {
			return // the client went away
		}
		m.ServeHTTP(w, r)
	}))
}

// wait waits out the Latency fault, holding no lock (requests wait concurrently), and reports
// false if the client went away meanwhile.
func (f *Fake) wait(r *http.Request) bool {
	f.mu.Lock()
	lat := f.faults.Latency
	f.mu.Unlock()
	if lat <= 0 {
		return true
	}
	t := time.NewTimer(lat)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (f *Fake) info(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"network": "fakearweave", "height": len(f.blocks) - 1,
		"current": b64.EncodeToString(f.blocks[len(f.blocks)-1].hash), "blocks": len(f.blocks)})
}

// anchor answers GET /tx_anchor: the block SuggestedAnchorDepth from the tip (the tip itself
// by default).
func (f *Fake) anchor(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	io.WriteString(w, b64.EncodeToString(f.blocks[max(len(f.blocks)-f.cfg.SuggestedAnchorDepth, 0)].hash))
}

func (f *Fake) priceOf(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.PathValue("bytes"))
	if err != nil || n < 0 {
		http.Error(w, "Invalid byte size.", http.StatusBadRequest)
		return
	}
	io.WriteString(w, f.price(n).String())
}

// postTx validates a transaction as a node does, then takes it into the mempool. A bundle
// whose data came in the body (or had all come by chunks) is unbundled before the answer.
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
	id := tx.IDString()
	status, msg := f.take(id, &tx)
	switch status {
	case http.StatusOK:
		io.WriteString(w, msg)
	case 0: // taken, answer dropped
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	default:
		http.Error(w, msg, status)
	}
}

// take validates tx and takes it, unbundling its data when complete: it returns the answer
// (status 0: taken, the answer to be dropped). As a node, it answers 208 for a transaction it
// has before it looks at anything else. The signature is checked without mu held.
func (f *Fake) take(id string, tx *arweave.Tx) (int, string) {
	f.mu.Lock()
	switch roll := f.dice.Float64(); {
	case roll < f.faults.TooMany:
		f.mu.Unlock()
		return http.StatusTooManyRequests, msgTooMany
	case roll < f.faults.TooMany+f.faults.Unavailable:
		f.mu.Unlock()
		return http.StatusServiceUnavailable, "Service Unavailable"
	}
	_, known := f.txs[id]
	f.mu.Unlock()
	if known {
		return http.StatusAlreadyReported, msgAlready
	}
	if tx.Verify() != nil {
		return http.StatusBadRequest, msgVerification
	}
	reward, ok := new(big.Int).SetString(tx.Reward, 10)
	f.mu.Lock()
	if _, known := f.txs[id]; known { // taken by a concurrent post
		f.mu.Unlock()
		return http.StatusAlreadyReported, msgAlready
	}
	if !f.recentBlock(tx.LastTx) {
		f.mu.Unlock()
		return http.StatusBadRequest, msgInvalidAnchor
	}
	if !ok || reward.Cmp(f.price(tx.DataSize)) < 0 || tx.Quantity != "0" && tx.Quantity != "" {
		// A reward under the price, or a transfer (the fake holds no balances): refused
		// as a node refuses an underpaid or overspending transaction.
		f.mu.Unlock()
		return http.StatusBadRequest, msgVerification
	}
	f.seq++
	e := &entry{tx: tx, height: -1, data: tx.Data, reward: reward, seq: f.seq}
	if e.data == nil && tx.DataSize > 0 {
		if u, ok := f.chunks[b64.EncodeToString(tx.DataRoot)]; ok && u.complete() {
			e.data = u.data
		}
	}
	if isBundle(tx.Tags) {
		e.bundle = &bundle{}
	}
	f.txs[id] = e
	f.mempool = append(f.mempool, id)
	f.taken = append(f.taken, Taken{ID: id, Tags: tx.Tags, At: time.Now()})
	drop := f.dice.Float64() < f.faults.DropAfterAccept
	data := e.data
	f.mu.Unlock()
	f.index(id, e, data)
	if drop {
		return 0, ""
	}
	return http.StatusOK, "OK"
}

// postChunk takes a chunk whose data path proves it under its data root. The chunk that
// completes a bundle's data has it unbundled before the answer.
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
	type completed struct {
		id string
		e  *entry
	}
	var done []completed
	f.mu.Lock()
	u, found := f.chunks[c.DataRoot]
	if !found {
		u = &upload{size: size, data: make([]byte, size), got: map[int]bool{}}
		f.chunks[c.DataRoot] = u
	}
	// A chunk received again is the same bytes (its proof ties them to the root): the buffer
	// is not written twice, so data handed out once complete is never written again.
	if !u.got[lo] {
		copy(u.data[lo:hi], chunk)
		u.got[lo] = true
	}
	if u.complete() {
		for id, e := range f.txs {
			if e.data == nil && b64.EncodeToString(e.tx.DataRoot) == c.DataRoot {
				e.data = u.data
				done = append(done, completed{id, e})
			}
		}
	}
	f.mu.Unlock()
	for _, d := range done {
		f.index(d.id, d.e, u.data)
	}
	io.WriteString(w, "OK")
}

// complete reports whether every byte arrived (chunks never overlap: their starts cover it).
func (u *upload) complete() bool {
	return len(arweave.Chunks(make([]byte, u.size))) == len(u.got) || u.size == 0
}

func (f *Fake) lookup(w http.ResponseWriter, r *http.Request) (*entry, bool) {
	e, ok := f.txs[r.PathValue("id")]
	if !ok {
		http.Error(w, "Not Found.", http.StatusNotFound)
	}
	return e, ok
}

// status answers GET /tx/{id}/status, for transactions only: a node knows nothing of data
// items (404).
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
	writeJSON(w, http.StatusOK, map[string]any{"block_height": e.height, "block_indep_hash": b64.EncodeToString(f.blocks[e.height].hash),
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

// getBlock answers GET /block/height/{height} and GET /block/hash/{hash} with the fields of a
// node's block that the fake has: indep_hash, previous_block, height, timestamp, txs.
func (f *Fake) getBlock(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := -1
	if s := r.PathValue("height"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			http.Error(w, "Invalid height.", http.StatusBadRequest)
			return
		}
		h = n
	} else if hash, err := b64.DecodeString(r.PathValue("hash")); err == nil {
		for i, b := range f.blocks {
			if string(b.hash) == string(hash) {
				h = i
			}
		}
	}
	if h < 0 || h >= len(f.blocks) {
		http.Error(w, "Block not found.", http.StatusNotFound)
		return
	}
	b := f.blocks[h]
	prev := ""
	if h > 0 {
		prev = b64.EncodeToString(f.blocks[h-1].hash)
	}
	writeJSON(w, http.StatusOK, map[string]any{"indep_hash": b64.EncodeToString(b.hash), "previous_block": prev,
		"height": h, "timestamp": b.at.Unix(), "txs": append([]string{}, b.txs...)})
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
