package fakenear

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
)

// maxRequest bounds a JSON-RPC request body, as nearcore's json_payload_max_size does.
const maxRequest = 10 << 20

// rpcRequest is a JSON-RPC 2.0 request.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
	ID      json.RawMessage `json:"id"`
}

// ServeHTTP serves JSON-RPC on POST /, nearcore's GET /status and /health, and the /fake/
// admin endpoints (which faults never touch; latency does, it is the connection's).
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/fake/"):
		e.fake.admin.ServeHTTP(w, r)
	case r.URL.Path == "/status" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		writeJSON(w, http.StatusOK, e.fake.statusView(e))
	case r.URL.Path == "/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		writeJSON(w, http.StatusOK, struct{}{})
	case r.URL.Path == "/" && r.Method == http.MethodPost:
		e.serveRPC(w, r)
	default:
		http.NotFound(w, r)
	}
}

// serveRPC answers one JSON-RPC request, with HTTP 200 whatever the answer, as nearcore does;
// the endpoint's fault for the request may replace the answer by an HTTP error or a closed
// connection.
func (e *Endpoint) serveRPC(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
	if err != nil {
		return // the connection broke: nobody to answer
	}
	var req rpcRequest
	if len(body) > maxRequest || json.Unmarshal(body, &req) != nil || req.Method == "" {
		writeRPC(w, nil, nil, errParse("JSON RPC Request format was expected"))
		return
	}
	d := e.faults.decide(req.Method)
	if d.kind != "" {
		e.fake.log.Debug("fakenear: fault", "endpoint", e.name, "method", req.Method, "fault", d.kind, "status", d.status, "after", d.after)
	}
	if d.kind == FaultStatus && !d.after {
		http.Error(w, http.StatusText(d.status), d.status)
		return
	}
	result, rerr := e.call(r.Context(), &req, d)
	switch d.kind {
	case FaultDropResponse:
		dropConnection(w)
	case FaultStatus:
		http.Error(w, http.StatusText(d.status), d.status)
	default:
		writeRPC(w, req.ID, result, rerr)
	}
}

// call dispatches a request to its method.
func (e *Endpoint) call(ctx context.Context, req *rpcRequest, d decision) (json.RawMessage, *rpcError) {
	tx := slices.Contains(submitMethods, req.Method) || req.Method == "tx" || req.Method == "EXPERIMENTAL_tx_status"
	if d.kind == FaultTimeout && !tx {
		return nil, errTimeout()
	}
	switch req.Method {
	case "block":
		return e.block(req.Params)
	case "query":
		return e.query(req.Params)
	case "status":
		return marshalResult(e.fake.statusView(e))
	case "gas_price":
		return marshalResult(map[string]string{"gas_price": gasPrice})
	case "send_tx":
		return e.sendTx(ctx, req.Params, d)
	case "broadcast_tx_async":
		return e.broadcastAsync(req.Params, d)
	case "broadcast_tx_commit":
		return e.broadcastCommit(ctx, req.Params, d)
	case "tx":
		return e.txStatus(ctx, req.Params, false, d)
	case "EXPERIMENTAL_tx_status":
		return e.txStatus(ctx, req.Params, true, d)
	}
	return nil, errMethodNotFound(req.Method)
}

func marshalResult(v any) (json.RawMessage, *rpcError) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, &rpcError{Code: codeServerError, Message: "Server error", Data: err.Error()}
	}
	return raw, nil
}

func writeRPC(w http.ResponseWriter, id, result json.RawMessage, rerr *rpcError) {
	if len(id) == 0 {
		id = json.RawMessage(`null`)
	}
	resp := rpcResponse{JSONRPC: "2.0", ID: id}
	if rerr != nil {
		resp.Error = rerr
	} else {
		resp.Result = result
	}
	writeJSON(w, http.StatusOK, resp)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a write error means the client left
}

// dropConnection closes the request's connection without writing anything.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("fakenear: the response writer cannot hijack its connection")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return // the connection is gone already
	}
	conn.Close()
}
