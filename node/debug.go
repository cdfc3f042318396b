package node

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"time"

	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/ident"
)

// startDebug serves Go's profiles (net/http/pprof) on addr, a listener of its own so that
// they are never reachable through the public API address.
func startDebug(addr string, logger *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug listener on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	registerProfiles(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	logger.Info("serving profiles", "addr", ln.Addr().String(), "path", "/debug/pprof/")
	return srv, nil
}

// registerProfiles adds Go's profiles at /debug/pprof/ to mux, all but the command line:
// /debug/pprof/cmdline would show the flags, a token given as one among them, to whoever
// reaches the listener. It is answered 404 not_found as an unknown path is, by a route of
// its own, so that the answer does not hang on how pprof.Index treats names it does not know.
//
// The index page at /debug/pprof/ is ours for the same reason: pprof.Index lists cmdline
// among the profiles. Every other path under /debug/pprof/ is pprof.Index's, which serves
// the named profile.
func registerProfiles(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debug/pprof/" {
			profilesIndex(w, r)
			return
		}
		pprof.Index(w, r)
	})
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, r *http.Request) {
		api.WriteAPIError(w, api.Errorf(http.StatusNotFound, "not_found", "no route for %s", ident.Quote(r.URL.Path)))
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// profilesIndex is the page at /debug/pprof/: pprof.Index's, without its lines about cmdline
// (each profile is one line of its table and one of its descriptions).
func profilesIndex(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	pprof.Index(rec, r)
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(rec.Body.Bytes(), []byte("\n")) {
		if !bytes.Contains(line, []byte(">cmdline<")) && !bytes.Contains(line, []byte(">cmdline: <")) {
			out.Write(line)
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(out.Bytes())
}

// startAdmin serves the operator's routes of mux (Mux.Admin) and Go's profiles on
// addr (--admin-addr), with the public listener's timeouts.
func (n *Node) startAdmin(addr string, mux *Mux, t api.ServerTimeouts) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin listener on %s: %w", addr, err)
	}
	n.adminLn = ln
	admin := http.NewServeMux()
	registerProfiles(admin)
	handler, err := api.Instrument(n.registry, api.RouteErrors(mux.Admin()))
	if err != nil {
		return err
	}
	admin.Handle("/", handler)
	n.admin = &http.Server{Handler: admin}
	t.Apply(n.admin)
	n.admin.WriteTimeout = max(n.admin.WriteTimeout, time.Minute) // a CPU profile or trace takes its seconds
	go func() { _ = n.admin.Serve(ln) }()
	n.logger.Info("serving the operator's routes", "addr", ln.Addr().String())
	return nil
}

// AdminAddr is the address of the operator's listener ("" without --admin-addr).
func (n *Node) AdminAddr() string {
	if n.adminLn == nil {
		return ""
	}
	return n.adminLn.Addr().String()
}
