package node

import (
	"bytes"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	runtimepprof "runtime/pprof"
	"sort"
	"time"

	"github.com/shardkeeper/shardkeeper/actors/kit"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/domain"
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
		api.WriteAPIError(w, api.Errorf(http.StatusNotFound, "not_found", "no route for %s", kit.Quote(r.URL.Path)))
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// handlerProfiles are the profiles net/http/pprof serves from handlers of their own rather
// than from runtime/pprof's registry, with what the index says of them; cmdline is left out.
var handlerProfiles = map[string]string{
	"profile": "CPU profile. You can specify the duration in the seconds GET parameter. After you get the profile file, use the go tool pprof command to investigate the profile.",
	"symbol":  "Maps given program counters to function names. Counters can be specified in a GET raw query or POST body, multiple counters are separated by '+'.",
	"trace":   "A trace of execution of the current program. You can specify the duration in the seconds GET parameter. After you get the trace file, use the go tool trace command to investigate the trace.",
}

// registryProfiles says what the profiles of runtime/pprof's registry hold, as pprof.Index does.
var registryProfiles = map[string]string{
	"allocs":       "A sampling of all past memory allocations",
	"block":        "Stack traces that led to blocking on synchronization primitives",
	"goroutine":    "Stack traces of all current goroutines. Use debug=2 as a query parameter to export in the same format as an unrecovered panic.",
	"heap":         "A sampling of memory allocations of live objects. You can specify the gc GET parameter to run GC before taking the heap sample.",
	"mutex":        "Stack traces of holders of contended mutexes",
	"threadcreate": "Stack traces that led to the creation of new OS threads",
}

type profileEntry struct {
	Name  string
	Count int // -1: not a counted profile
	Desc  string
}

var indexPage = template.Must(template.New("index").Parse(`<html>
<head>
<title>/debug/pprof/</title>
<style>
.profile-name{
	display:inline-block;
	width:6rem;
}
</style>
</head>
<body>
/debug/pprof/
<br>
<p>Set debug=1 as a query parameter to export in legacy text format</p>
<br>
Types of profiles available:
<table>
<thead><td>Count</td><td>Profile</td></thead>
{{range .}}<tr><td>{{if ge .Count 0}}{{.Count}}{{end}}</td><td><a href="{{.Name}}?debug=1">{{.Name}}</a></td></tr>
{{end}}</table>
<a href="goroutine?debug=2">full goroutine stack dump</a>
<br>
<p>
Profile Descriptions:
<ul>
{{range .}}<li><div class=profile-name>{{.Name}}: </div> {{.Desc}}</li>
{{end}}</ul>
</p>
</body>
</html>
`))

// profilesIndex is the page at /debug/pprof/: pprof.Index's, without cmdline.
func profilesIndex(w http.ResponseWriter, _ *http.Request) {
	var profiles []profileEntry
	for _, p := range runtimepprof.Profiles() {
		profiles = append(profiles, profileEntry{Name: p.Name(), Count: p.Count(), Desc: registryProfiles[p.Name()]})
	}
	for name, desc := range handlerProfiles {
		profiles = append(profiles, profileEntry{Name: name, Count: -1, Desc: desc})
	}
	sort.Slice(profiles, func(i, j int) bool { return profiles[i].Name < profiles[j].Name })
	var b bytes.Buffer
	if err := indexPage.Execute(&b, profiles); err != nil {
		api.WriteAPIError(w, api.Errorf(http.StatusInternalServerError, "internal", "profiles index: %v", err))
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// startAdmin serves the operator's routes of mux (domain.Mux.Admin) and Go's profiles on
// addr (--admin-addr), with the public listener's timeouts.
func (n *Node) startAdmin(addr string, mux *domain.Mux, t api.ServerTimeouts) error {
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
