package node

import (
	"net/http"
	"strconv"

	"github.com/shardkeeper/shardkeeper/cluster"
)

// LeaderHeader names, on an answer this node got by forwarding the request to the leader of
// its actor's partition, the leader's HTTP address, and PartitionHeader that partition: a
// client that keeps the routing table (GET /v1/cluster/routes) sends that partition's next
// requests there. A request that calls several actors names the last one forwarded.
const (
	LeaderHeader    = "Shardkeeper-Leader"
	PartitionHeader = "Shardkeeper-Partition"
)

// leaderHint answers each request that h forwarded to another node with LeaderHeader. It
// passes h a copy of the request (with a new context): it must wrap whatever reads what the
// mux records in the request (its pattern).
func leaderHint(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, fwd := cluster.WithForwardNote(r.Context())
		h.ServeHTTP(&hintWriter{ResponseWriter: w, fwd: fwd}, r.WithContext(ctx))
	})
}

// hintWriter sets LeaderHeader before the first byte of the answer goes out.
type hintWriter struct {
	http.ResponseWriter
	fwd   *cluster.Forwarded
	wrote bool
}

func (w *hintWriter) hint() {
	if !w.wrote {
		w.wrote = true
		if p, addr, ok := w.fwd.Leader(); ok {
			w.Header().Set(LeaderHeader, addr)
			w.Header().Set(PartitionHeader, strconv.FormatUint(uint64(p), 10))
		}
	}
}

func (w *hintWriter) WriteHeader(code int) {
	w.hint()
	w.ResponseWriter.WriteHeader(code)
}

func (w *hintWriter) Write(b []byte) (int, error) {
	w.hint()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer (flushes, deadlines).
func (w *hintWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
