// Package deploy checks the deploy kit (the Dockerfile, deploy/compose, deploy/k8s) without
// Docker or a cluster: every manifest parses; every flag and SHARDKEEPER_* variable given to
// `shardkeeper serve` is one a freshly built binary lists in `serve --help`; the pieces agree
// with each other (node ids, addresses, ports, probes, volumes); and, with the secrets the
// make-secrets scripts make, each Compose node's and each pod's configuration loads as serve
// would load it — values, secret files in the modes their init step gives them, and a TLS
// certificate naming the node. docker compose, haproxy and kubectl check their own files when
// they are installed.
package deploy

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/pki"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/all"
	"go.yaml.in/yaml/v3"
)

// root is the repository root: the tests run in test/deploy.
var root = func() string {
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return abs
}()

func repoPath(parts ...string) string { return filepath.Join(append([]string{root}, parts...)...) }

// ---- the binary and its flags ----

var (
	buildOnce sync.Once
	binPath   string
	binErr    error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// shardkeeper builds ./cmd/shardkeeper once for the whole run and returns its path.
func shardkeeper(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "deploy-test-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "shardkeeper")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/shardkeeper")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/shardkeeper: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// serveOptions is what `shardkeeper serve` accepts: flag names and environment variables.
type serveOptions struct {
	flags map[string]bool // without dashes
	env   map[string]bool // SHARDKEEPER_*
}

var (
	optsOnce sync.Once
	opts     serveOptions
	optsErr  error
)

// helpLine is one option of `serve --help`: "  --node-id string   SHARDKEEPER_NODE_ID   …".
var helpLine = regexp.MustCompile(`^\s+--([a-z0-9][a-z0-9-]*)\s.*?\b(SHARDKEEPER_[A-Z0-9_]+)\b`)

func serveOpts(t *testing.T) serveOptions {
	t.Helper()
	bin := shardkeeper(t)
	optsOnce.Do(func() {
		out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
		if err != nil {
			optsErr = fmt.Errorf("shardkeeper serve --help: %v\n%s", err, out)
			return
		}
		opts = serveOptions{flags: map[string]bool{}, env: map[string]bool{}}
		for _, l := range strings.Split(string(out), "\n") {
			if m := helpLine.FindStringSubmatch(l); m != nil {
				opts.flags[m[1]] = true
				opts.env[m[2]] = true
			}
		}
		// The help must be the one this test can read.
		for _, f := range []string{"node-id", "data-dir", "join", "advertise-addr", "tls-ca", "tls-cert", "tls-key", "gossip-key-file"} {
			if !opts.flags[f] {
				optsErr = fmt.Errorf("serve --help lists no --%s; did its format change?\n%s", f, out)
			}
		}
	})
	if optsErr != nil {
		t.Fatal(optsErr)
	}
	return opts
}

// parseFlags returns the flags of a `serve` argument list (after "serve") by name, with
// their values; a flag's value is "=value" or the next argument. Unknown flags are reported
// in unknown; an argument that is not a flag where one is expected also is.
func parseFlags(args []string, known serveOptions) (flags map[string]string, unknown []string) {
	flags = map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			unknown = append(unknown, fmt.Sprintf("%q (arguments after it are not flags)", a))
			break
		}
		if !strings.HasPrefix(a, "-") {
			unknown = append(unknown, fmt.Sprintf("%q (not a flag: serve takes no arguments)", a))
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !known.flags[name] {
			unknown = append(unknown, "--"+name)
		}
		if !hasValue && i+1 < len(args) {
			i++
			value = args[i]
		}
		flags[name] = value
	}
	return flags, unknown
}

// envFlags maps SHARDKEEPER_* variables to flag names and reports unknown variables.
func envFlags(env map[string]string, known serveOptions) (flags map[string]string, unknown []string) {
	flags = map[string]string{}
	for k, v := range env {
		if !strings.HasPrefix(k, "SHARDKEEPER_") {
			continue
		}
		if !known.env[k] {
			unknown = append(unknown, k)
			continue
		}
		flags[strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "SHARDKEEPER_")), "_", "-")] = v
	}
	sort.Strings(unknown)
	return flags, unknown
}

// TestFlagCheck makes sure the flag check fails on what it must fail on.
func TestFlagCheck(t *testing.T) {
	known := serveOpts(t)
	_, unknown := parseFlags([]string{"--node-id", "n1", "--tls-ca=/x", "--no-such-flag=1", "--data-dirr", "/d"}, known)
	if want := []string{"--no-such-flag", "--data-dirr"}; !slices.Equal(unknown, want) {
		t.Errorf("unknown flags = %q, want %q", unknown, want)
	}
	_, unknown = envFlags(map[string]string{"SHARDKEEPER_NODE_ID": "n1", "SHARDKEEPER_NODEID": "n1"}, known)
	if want := []string{"SHARDKEEPER_NODEID"}; !slices.Equal(unknown, want) {
		t.Errorf("unknown variables = %q, want %q", unknown, want)
	}
}

// ---- every YAML file parses ----

func TestManifestsParse(t *testing.T) {
	n := 0
	err := filepath.WalkDir(repoPath("deploy"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			// Made by the make-secrets scripts, not part of the kit.
			if d.Name() == "secrets" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".yml", ".yaml":
			n++
			if _, err := yamlDocs(p); err != nil {
				t.Errorf("%s: %v", rel, err)
			}
		case ".json":
			b, err := os.ReadFile(p)
			if err == nil && !json.Valid(b) {
				err = errors.New("not valid JSON")
			}
			if err != nil {
				t.Errorf("%s: %v", rel, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 7 {
		t.Errorf("found %d YAML files under deploy/, expected the compose and k8s manifests", n)
	}
}

// yamlDocs decodes every document of a YAML file.
func yamlDocs(p string) ([]*yaml.Node, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			return docs, nil
		} else if err != nil {
			return nil, err
		}
		if len(n.Content) > 0 && !(n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null") {
			docs = append(docs, &n)
		}
	}
}

func decodeYAML(t *testing.T, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

// ---- Dockerfile ----

type instruction struct {
	cmd, args string
	line      int
}

// dockerfileStages splits a Dockerfile into its stages' instructions (continuations joined,
// comments dropped).
func dockerfileStages(t *testing.T) [][]instruction {
	t.Helper()
	b, err := os.ReadFile(repoPath("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	var cur strings.Builder
	start := 0
	for i, l := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args), start}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile:%d: %s before FROM", in.line, in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	return stages
}

func find(stage []instruction, cmd string) []instruction {
	var out []instruction
	for _, in := range stage {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// imageUID is the uid the final image runs as.
func imageUID(t *testing.T) string {
	stages := dockerfileStages(t)
	users := find(stages[len(stages)-1], "USER")
	if len(users) == 0 {
		t.Fatal("Dockerfile: the final stage has no USER")
	}
	uid, _, _ := strings.Cut(users[len(users)-1].args, ":")
	return uid
}

func TestDockerfile(t *testing.T) {
	known := serveOpts(t)
	stages := dockerfileStages(t)
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s), want a build stage and a final one", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	if from := build[0].args; !strings.HasPrefix(from, "golang:1.26") {
		t.Errorf("build stage FROM %q, want golang:1.26", from)
	}
	var buildRun string
	for _, in := range find(build, "RUN") {
		if strings.Contains(in.args, "go build") {
			buildRun = in.args
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/shardkeeper"} {
		if !strings.Contains(buildRun, want) {
			t.Errorf("the go build RUN lacks %s: %q", want, buildRun)
		}
	}
	// The same link-time variables as the Makefile's build.
	mk, err := os.ReadFile(repoPath("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	xs := regexp.MustCompile(`-X ([^\s=]+)=`).FindAllStringSubmatch(string(mk), -1)
	if len(xs) == 0 {
		t.Error("Makefile sets no -X variables; the check below is empty")
	}
	for _, x := range xs {
		if !strings.Contains(buildRun, "-X "+x[1]+"=") {
			t.Errorf("the Dockerfile's go build does not set %s as the Makefile does", x[1])
		}
	}

	uid := imageUID(t)
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("final stage USER %q: want a non-root user", uid)
	}
	if _, err := strconv.Atoi(uid); err != nil {
		t.Errorf("final stage USER %q: want a numeric uid (runAsNonRoot can only verify those)", uid)
	}

	hc := find(final, "HEALTHCHECK")
	if len(hc) != 1 {
		t.Errorf("final stage has %d HEALTHCHECKs, want 1", len(hc))
	} else if a := hc[0].args; strings.HasPrefix(strings.ToUpper(a), "NONE") || !strings.Contains(a, "/readyz") {
		t.Errorf("HEALTHCHECK %q does not check /readyz", a)
	}

	jsonArgs := func(cmd string) []string {
		ins := find(final, cmd)
		if len(ins) == 0 {
			t.Fatalf("final stage has no %s", cmd)
		}
		var v []string
		if err := json.Unmarshal([]byte(ins[len(ins)-1].args), &v); err != nil {
			t.Fatalf("%s %s: want the JSON (exec) form: %v", cmd, ins[len(ins)-1].args, err)
		}
		return v
	}
	entry := jsonArgs("ENTRYPOINT")
	if !slices.Equal(entry, []string{"/shardkeeper"}) {
		t.Errorf("ENTRYPOINT %q, want [\"/shardkeeper\"]", entry)
	}
	copied := false
	for _, in := range find(final, "COPY") {
		copied = copied || (strings.Contains(in.args, "--from=") && strings.HasSuffix(in.args, " "+entry[0]))
	}
	if !copied {
		t.Errorf("the final stage does not COPY the binary from the build stage to %s", entry[0])
	}
	cmd := jsonArgs("CMD")
	if len(cmd) == 0 || cmd[0] != "serve" {
		t.Fatalf("CMD %q does not run serve", cmd)
	}
	if _, unknown := parseFlags(cmd[1:], known); len(unknown) > 0 {
		t.Errorf("CMD passes what shardkeeper serve does not accept: %s", strings.Join(unknown, ", "))
	}
	env := map[string]string{}
	for _, in := range find(final, "ENV") {
		k, v, _ := strings.Cut(in.args, "=")
		env[k] = v
	}
	if _, unknown := envFlags(env, known); len(unknown) > 0 {
		t.Errorf("ENV sets variables shardkeeper serve does not read: %s", strings.Join(unknown, ", "))
	}
	// The default command is a one-node cluster serve accepts as it is.
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if _, err := config.Load(cmd[1:], lookup, io.Discard, services.Settings(all.Services())...); err != nil {
		t.Errorf("CMD %q: shardkeeper serve refuses it: %v", cmd, err)
	}

	var exposed []string
	for _, in := range find(final, "EXPOSE") {
		exposed = append(exposed, strings.Fields(in.args)...)
	}
	for _, p := range []string{"8080/tcp", "9090/tcp", "7946/tcp", "7946/udp", "7000/tcp", "8090/tcp"} {
		if !slices.Contains(exposed, p) && !slices.Contains(exposed, strings.TrimSuffix(p, "/tcp")) {
			t.Errorf("EXPOSE lacks %s (has %v)", p, exposed)
		}
	}
}

func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile(repoPath(".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			have[strings.Trim(l, "/")] = true
		}
	}
	for _, want := range []string{".git", "bin", "data"} {
		if !have[want] {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
}

// ---- Compose ----

// strList is a YAML string or list of strings (compose's command, entrypoint, test).
type strList []string

func (s *strList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = strings.Fields(n.Value)
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*s = l
	return nil
}

// strMap is a YAML mapping or a list of KEY=VALUE (compose's environment).
type strMap map[string]string

func (s *strMap) UnmarshalYAML(n *yaml.Node) error {
	m := map[string]string{}
	if n.Kind == yaml.SequenceNode {
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		for _, kv := range l {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
	} else if err := n.Decode(&m); err != nil {
		return err
	}
	*s = m
	return nil
}

type composeNetwork struct {
	IPv4 string `yaml:"ipv4_address"`
}

// composeNetworks is a list of network names or a mapping of them.
type composeNetworks map[string]composeNetwork

func (c *composeNetworks) UnmarshalYAML(n *yaml.Node) error {
	m := map[string]composeNetwork{}
	if n.Kind == yaml.SequenceNode {
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		for _, name := range l {
			m[name] = composeNetwork{}
		}
	} else {
		var raw map[string]*composeNetwork
		if err := n.Decode(&raw); err != nil {
			return err
		}
		for k, v := range raw {
			if v == nil {
				v = &composeNetwork{}
			}
			m[k] = *v
		}
	}
	*c = m
	return nil
}

type composeService struct {
	Image       string
	Build       any
	User        string
	Entrypoint  strList
	Command     strList
	Environment strMap
	Healthcheck *struct {
		Test    strList
		Disable bool
	}
	Networks composeNetworks
	Volumes  []string
}

// mounts maps each volume's container path to its source.
func (s composeService) mounts() map[string]string {
	m := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			m[parts[1]] = parts[0]
		}
	}
	return m
}

type composeFile struct {
	Services map[string]composeService
	Networks map[string]struct {
		IPAM struct {
			Config []struct{ Subnet string }
		} `yaml:"ipam"`
	}
	Volumes map[string]any
}

// secretFlags are the flags that name secret files.
var secretFlags = []string{"tls-ca", "tls-cert", "tls-key", "gossip-key-file", "admin-token-file"}

func port(t *testing.T, what, hostport string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Errorf("%s %q: %v", what, hostport, err)
	}
	return p
}

func TestCompose(t *testing.T) {
	known := serveOpts(t)
	dir := repoPath("deploy", "compose")
	var cf composeFile
	decodeYAML(t, filepath.Join(dir, "docker-compose.yml"), &cf)

	for _, s := range []string{"n1", "n2", "n3", "haproxy", "prometheus", "grafana"} {
		if _, ok := cf.Services[s]; !ok {
			t.Errorf("docker-compose.yml has no service %s", s)
		}
	}

	// The nodes: services that run serve.
	type node struct {
		name  string
		flags map[string]string
	}
	var nodes []node
	for name, s := range cf.Services {
		if len(s.Command) == 0 || s.Command[0] != "serve" {
			continue
		}
		flags, unknown := parseFlags(s.Command[1:], known)
		if len(unknown) > 0 {
			t.Errorf("service %s passes what shardkeeper serve does not accept: %s", name, strings.Join(unknown, ", "))
		}
		envf, unknownEnv := envFlags(s.Environment, known)
		if len(unknownEnv) > 0 {
			t.Errorf("service %s sets variables shardkeeper serve does not read: %s", name, strings.Join(unknownEnv, ", "))
		}
		for k, v := range envf {
			if _, ok := flags[k]; !ok {
				flags[k] = v
			}
		}
		nodes = append(nodes, node{name, flags})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	var names []string
	for _, n := range nodes {
		names = append(names, n.name)
	}
	if want := []string{"n1", "n2", "n3"}; !slices.Equal(names, want) {
		t.Fatalf("services running serve: %v, want %v", names, want)
	}

	var subnet *net.IPNet
	for _, nw := range cf.Networks {
		for _, c := range nw.IPAM.Config {
			if _, n, err := net.ParseCIDR(c.Subnet); err == nil {
				subnet = n
			}
		}
	}
	uid := imageUID(t)
	initSvc := cf.Services["secrets-init"]
	initMounts := initSvc.mounts()
	secretsDir := filepath.Join(t.TempDir(), "secrets")
	runScript(t, filepath.Join(dir, "make-secrets.sh"), secretsDir)

	gossipPort := map[string]string{}
	for _, n := range nodes {
		gossipPort[n.name] = port(t, n.name+" --gossip-addr", n.flags["gossip-addr"])
	}
	var httpPort, adminPort string
	for _, n := range nodes {
		s := cf.Services[n.name]
		f := n.flags
		if f["node-id"] != n.name {
			t.Errorf("service %s runs --node-id %q: want the service name, which its certificate (%s.pem) and the others' --join use", n.name, f["node-id"], n.name)
		}
		for _, k := range []string{"tls-ca", "tls-cert", "tls-key", "gossip-key-file", "data-dir", "advertise-addr", "join", "bootstrap-expect", "admin-addr"} {
			if f[k] == "" {
				t.Errorf("service %s does not set --%s", n.name, k)
			}
		}
		if f["bootstrap-expect"] != strconv.Itoa(len(nodes)) {
			t.Errorf("service %s: --bootstrap-expect %q, want %d", n.name, f["bootstrap-expect"], len(nodes))
		}
		// --advertise-addr is this service's fixed address.
		var ip string
		for _, nw := range s.Networks {
			if nw.IPv4 != "" {
				ip = nw.IPv4
			}
		}
		if ip == "" || f["advertise-addr"] != ip {
			t.Errorf("service %s: --advertise-addr %q, but its address on the network is %q", n.name, f["advertise-addr"], ip)
		}
		if subnet != nil && !subnet.Contains(net.ParseIP(ip)) {
			t.Errorf("service %s: address %s is outside the network's subnet %s", n.name, ip, subnet)
		}
		// --join names the other nodes at their gossip ports, not this one: a join that
		// reaches only the node itself counts as done.
		for _, j := range strings.Split(f["join"], ",") {
			host, p, err := net.SplitHostPort(j)
			switch {
			case err != nil:
				t.Errorf("service %s: --join entry %q: %v", n.name, j, err)
			case host == n.name:
				t.Errorf("service %s joins itself (%s)", n.name, j)
			case gossipPort[host] == "":
				t.Errorf("service %s: --join entry %q is not a node service", n.name, j)
			case gossipPort[host] != p:
				t.Errorf("service %s: --join entry %q, but %s gossips on port %s", n.name, j, host, gossipPort[host])
			}
		}
		// Secret files: each one secrets-init installs into a volume of this node, owned by
		// the image's user; then the configuration as serve loads it, files included.
		files := composeNodeFiles(t, initSvc, s, n.name, secretsDir, uid)
		for _, k := range secretFlags {
			if file := f[k]; file != "" && files[file] == nil {
				t.Errorf("service %s: --%s %s is no file secrets-init installs for it", n.name, k, file)
			}
		}
		checkNodeConfig(t, "service "+n.name, s.Command[1:], s.Environment, files)
		// The node's health check is readiness.
		hc := s.Healthcheck
		if hc == nil || hc.Disable || !strings.Contains(strings.Join(hc.Test, " "), "/readyz") {
			t.Errorf("service %s: its healthcheck does not check /readyz", n.name)
		}
		hp := port(t, n.name+" --http-addr", f["http-addr"])
		if hc != nil && !strings.Contains(strings.Join(hc.Test, " "), ":"+hp+"/readyz") {
			t.Errorf("service %s: healthcheck %q is not on its HTTP port %s", n.name, hc.Test, hp)
		}
		if httpPort != "" && hp != httpPort {
			t.Errorf("nodes listen on different HTTP ports (%s, %s)", httpPort, hp)
		}
		httpPort = hp
		adminPort = port(t, n.name+" --admin-addr", f["admin-addr"])
	}
	if initSvc.User != "0:0" && initSvc.User != "0" && initSvc.User != "root" {
		t.Errorf("secrets-init runs as %q: it needs root to give the files to uid %s", initSvc.User, uid)
	}
	if src := initMounts["/in"]; src != "./secrets" {
		t.Errorf("secrets-init reads %q, want ./secrets (what make-secrets.sh writes)", src)
	}

	// HAProxy: every node's HTTP port, checked with /readyz.
	hcfg, err := os.ReadFile(filepath.Join(dir, "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*option httpchk GET /readyz\s*$`).Match(hcfg) {
		t.Error("haproxy.cfg does not health-check with GET /readyz")
	}
	for _, n := range nodes {
		if !regexp.MustCompile(`(?m)^\s*server \S+ ` + n.name + `:` + httpPort + ` .*\bcheck\b`).Match(hcfg) {
			t.Errorf("haproxy.cfg has no checked server %s:%s", n.name, httpPort)
		}
	}
	if !slices.ContainsFunc(cf.Services["haproxy"].Volumes, func(v string) bool { return strings.HasPrefix(v, "./haproxy.cfg:") }) {
		t.Error("the haproxy service does not mount ./haproxy.cfg")
	}

	// Prometheus: every node's admin listener.
	var prom struct {
		ScrapeConfigs []struct {
			MetricsPath   string                       `yaml:"metrics_path"`
			StaticConfigs []struct{ Targets []string } `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	decodeYAML(t, filepath.Join(dir, "prometheus.yml"), &prom)
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("prometheus.yml scrapes %s, not /metrics", sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	sort.Strings(targets)
	var wantTargets []string
	for _, n := range nodes {
		wantTargets = append(wantTargets, n.name+":"+adminPort)
	}
	if !slices.Equal(targets, wantTargets) {
		t.Errorf("prometheus.yml targets %v, want every node's admin listener %v", targets, wantTargets)
	}
	if !slices.ContainsFunc(cf.Services["prometheus"].Volumes, func(v string) bool { return strings.HasPrefix(v, "./prometheus.yml:") }) {
		t.Error("the prometheus service does not mount ./prometheus.yml")
	}

	t.Run("grafana", func(t *testing.T) { checkGrafana(t, dir, cf.Services["grafana"]) })

	t.Run("docker compose config", func(t *testing.T) {
		if _, err := exec.LookPath("docker"); err != nil {
			t.Skip("docker is not installed: docker compose config not run")
		}
		if err := exec.Command("docker", "compose", "version").Run(); err != nil {
			t.Skip("docker compose is not available: docker compose config not run")
		}
		cmd := exec.Command("docker", "compose", "config", "-q")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("docker compose config -q: %v\n%s", err, out)
		}
	})

	t.Run("haproxy -c", func(t *testing.T) {
		if _, err := exec.LookPath("haproxy"); err != nil {
			t.Skip("haproxy is not installed: haproxy.cfg not checked by haproxy")
		}
		// The node names do not resolve here: the servers start without an address.
		if out, err := exec.Command("haproxy", "-c", "-f", filepath.Join(dir, "haproxy.cfg")).CombinedOutput(); err != nil {
			t.Errorf("haproxy -c: %v\n%s", err, out)
		}
	})
}

// checkGrafana checks that Grafana gets Prometheus as a data source and the dashboard bound
// to it: the dashboard is an export whose data source is an input (${DS_PROMETHEUS}), which
// file provisioning leaves as is, so the service substitutes it before Grafana starts.
func checkGrafana(t *testing.T, dir string, g composeService) {
	var ds struct {
		Datasources []struct {
			Name, UID, Type, URL string
		}
	}
	decodeYAML(t, filepath.Join(dir, "grafana", "provisioning", "datasources", "prometheus.yml"), &ds)
	uids := map[string]bool{}
	for _, d := range ds.Datasources {
		if d.Type == "prometheus" {
			uids[d.UID] = true
			if !strings.HasPrefix(d.URL, "http://prometheus:") {
				t.Errorf("data source %s points at %s, not the prometheus service", d.Name, d.URL)
			}
		}
	}
	if len(uids) == 0 {
		t.Fatal("no Prometheus data source is provisioned")
	}
	var dp struct {
		Providers []struct {
			Type    string
			Options struct{ Path string }
		}
	}
	decodeYAML(t, filepath.Join(dir, "grafana", "provisioning", "dashboards", "shardkeeper.yml"), &dp)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" {
		t.Fatalf("want one file dashboard provider, have %+v", dp.Providers)
	}

	mounts := g.mounts()
	if mounts["/etc/grafana/provisioning"] != "./grafana/provisioning" {
		t.Errorf("grafana does not mount ./grafana/provisioning at /etc/grafana/provisioning: %v", g.Volumes)
	}
	script := strings.ReplaceAll(strings.Join(g.Command, " "), "$$", "$")
	m := regexp.MustCompile(`sed 's/\[\$\]\{(DS_[A-Z0-9_]+)\}/([^/]+)/g' (\S+) > (\S+)`).FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("the grafana service does not substitute the dashboard's data source input: %q", script)
	}
	input, uid, src, dst := m[1], m[2], m[3], m[4]
	if !uids[uid] {
		t.Errorf("the dashboard is bound to data source uid %q, but the provisioned ones are %v", uid, uids)
	}
	if mounts[src] != "../grafana/shardkeeper.json" {
		t.Errorf("grafana reads the dashboard from %s, which is not ../grafana/shardkeeper.json: %v", src, g.Volumes)
	}
	if path.Dir(dst) != path.Clean(dp.Providers[0].Options.Path) {
		t.Errorf("grafana writes the dashboard to %s, but the provider reads %s", dst, dp.Providers[0].Options.Path)
	}
	dash, err := os.ReadFile(repoPath("deploy", "grafana", "shardkeeper.json"))
	if err != nil {
		t.Fatal(err)
	}
	bound := strings.ReplaceAll(string(dash), "${"+input+"}", uid)
	if left := regexp.MustCompile(`\$\{DS_[A-Z0-9_]+\}`).FindAllString(bound, -1); len(left) > 0 {
		t.Errorf("the dashboard still refers to %v after the substitution", slices.Compact(left))
	}
	if !json.Valid([]byte(bound)) {
		t.Error("the substituted dashboard is not valid JSON")
	}
	if !strings.Contains(script, "exec /run.sh") {
		t.Error("the grafana service's command does not start Grafana (exec /run.sh)")
	}
}

// ---- Kubernetes ----

type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string
	Metadata   struct{ Name string }
	Spec       yaml.Node
	StringData map[string]string `yaml:"stringData"`
	file       string
}

type envVar struct {
	Name      string
	Value     string
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet *struct {
		Path string
		Port any
	} `yaml:"httpGet"`
}

type container struct {
	Name    string
	Image   string
	Command []string
	Args    []string
	Env     []envVar
	Ports   []struct {
		Name          string
		ContainerPort int `yaml:"containerPort"`
		Protocol      string
	}
	Readiness    *probe `yaml:"readinessProbe"`
	Liveness     *probe `yaml:"livenessProbe"`
	Startup      *probe `yaml:"startupProbe"`
	VolumeMounts []struct {
		Name      string
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type statefulSetSpec struct {
	ServiceName         string `yaml:"serviceName"`
	Replicas            int
	PodManagementPolicy string `yaml:"podManagementPolicy"`
	Selector            struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	Template struct {
		Metadata struct{ Labels map[string]string }
		Spec     struct {
			SecurityContext struct {
				RunAsNonRoot *bool  `yaml:"runAsNonRoot"`
				RunAsUser    *int64 `yaml:"runAsUser"`
				FSGroup      *int64 `yaml:"fsGroup"`
			} `yaml:"securityContext"`
			InitContainers []container `yaml:"initContainers"`
			Containers     []container
			Volumes        []struct {
				Name   string
				Secret *struct {
					SecretName  string `yaml:"secretName"`
					DefaultMode *int   `yaml:"defaultMode"`
				}
				EmptyDir any `yaml:"emptyDir"`
			}
		}
	}
	VolumeClaimTemplates []struct {
		Metadata struct{ Name string }
	} `yaml:"volumeClaimTemplates"`
}

type serviceSpec struct {
	ClusterIP                string `yaml:"clusterIP"`
	PublishNotReadyAddresses bool   `yaml:"publishNotReadyAddresses"`
	Selector                 map[string]string
	Ports                    []struct {
		Name       string
		Port       int
		TargetPort any `yaml:"targetPort"`
		Protocol   string
	}
}

type pdbSpec struct {
	MaxUnavailable any `yaml:"maxUnavailable"`
	Selector       struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
}

// k8sObjects decodes the objects of the manifest files.
func k8sObjects(t *testing.T, files ...string) []k8sObject {
	t.Helper()
	var objs []k8sObject
	for _, f := range files {
		docs, err := yamlDocs(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range docs {
			var o k8sObject
			if err := d.Decode(&o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			o.file = filepath.Base(f)
			objs = append(objs, o)
		}
	}
	return objs
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// makeK8sSecrets runs deploy/k8s/make-secrets.sh into a new directory and returns it.
func makeK8sSecrets(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "secrets")
	runScript(t, repoPath("deploy", "k8s", "make-secrets.sh"), out)
	return out
}

func runScript(t *testing.T, script, out string) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh: the make-secrets scripts not run")
	}
	cmd := exec.Command("sh", script)
	cmd.Env = append(os.Environ(), "SHARDKEEPER_BIN="+shardkeeper(t), "SECRETS_DIR="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}
}

func TestKubernetes(t *testing.T) {
	known := serveOpts(t)
	dir := repoPath("deploy", "k8s")

	var kust struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string
		Resources  []string
		Images     []struct {
			Name    string
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		}
	}
	decodeYAML(t, filepath.Join(dir, "kustomization.yaml"), &kust)
	if kust.Kind != "Kustomization" || !strings.HasPrefix(kust.APIVersion, "kustomize.config.k8s.io/") {
		t.Errorf("kustomization.yaml is %s %s", kust.APIVersion, kust.Kind)
	}
	const generated = "secrets/secrets.yaml" // made by make-secrets.sh
	var files []string
	for _, r := range kust.Resources {
		if r == generated {
			continue
		}
		f := filepath.Join(dir, r)
		if _, err := os.Stat(f); err != nil {
			t.Errorf("kustomization.yaml lists %s: %v", r, err)
			continue
		}
		files = append(files, f)
	}
	if !slices.Contains(kust.Resources, generated) {
		t.Errorf("kustomization.yaml does not include %s, the Secrets make-secrets.sh makes", generated)
	}
	// Every manifest of the directory is in the kustomization.
	ms, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, m := range ms {
		if base := filepath.Base(m); base != "kustomization.yaml" && !slices.Contains(kust.Resources, base) {
			t.Errorf("%s is not in kustomization.yaml", base)
		}
	}

	objs := k8sObjects(t, files...)
	wantAPI := map[string]string{"StatefulSet": "apps/v1", "Service": "v1", "PodDisruptionBudget": "policy/v1", "Secret": "v1"}
	byKind := map[string][]k8sObject{}
	for _, o := range objs {
		if want, ok := wantAPI[o.Kind]; !ok {
			t.Errorf("%s: unexpected kind %s", o.file, o.Kind)
		} else if o.APIVersion != want {
			t.Errorf("%s: %s %s has apiVersion %s, want %s", o.file, o.Kind, o.Metadata.Name, o.APIVersion, want)
		}
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	if n := len(byKind["StatefulSet"]); n != 1 {
		t.Fatalf("%d StatefulSets, want 1", n)
	}
	if n := len(byKind["Service"]); n != 2 {
		t.Errorf("%d Services, want 2 (headless and client)", n)
	}
	if n := len(byKind["PodDisruptionBudget"]); n != 1 {
		t.Errorf("%d PodDisruptionBudgets, want 1", n)
	}

	sts := byKind["StatefulSet"][0]
	var ss statefulSetSpec
	if err := sts.Spec.Decode(&ss); err != nil {
		t.Fatal(err)
	}
	labels := ss.Template.Metadata.Labels
	if !subset(ss.Selector.MatchLabels, labels) {
		t.Errorf("the StatefulSet's selector %v does not select its pods %v", ss.Selector.MatchLabels, labels)
	}
	if ss.Replicas != 3 {
		t.Errorf("replicas %d, want 3", ss.Replicas)
	}
	if ss.PodManagementPolicy != "Parallel" {
		t.Errorf("podManagementPolicy %q, want Parallel (with --bootstrap-expect no pod is ready before the others start)", ss.PodManagementPolicy)
	}
	psc := ss.Template.Spec.SecurityContext
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("the pod's securityContext does not set runAsNonRoot: true")
	}
	if psc.FSGroup == nil {
		t.Error("the pod's securityContext sets no fsGroup (the data volume must be writable by the node)")
	}
	if uid := imageUID(t); psc.RunAsUser == nil || strconv.FormatInt(*psc.RunAsUser, 10) != uid {
		t.Errorf("the pod's runAsUser is not the image's uid %s", uid)
	}

	// Services.
	var headless, client string
	var clientTargets []string
	headlessPorts := map[string]bool{}
	for _, o := range byKind["Service"] {
		var s serviceSpec
		if err := o.Spec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		if !subset(s.Selector, labels) {
			t.Errorf("Service %s: selector %v does not select the pods %v", o.Metadata.Name, s.Selector, labels)
		}
		if s.ClusterIP == "None" {
			headless = o.Metadata.Name
			if !s.PublishNotReadyAddresses {
				t.Errorf("headless Service %s: publishNotReadyAddresses is not true: nodes could not find each other before they are ready", headless)
			}
			for _, p := range s.Ports {
				proto := p.Protocol
				if proto == "" {
					proto = "TCP"
				}
				headlessPorts[fmt.Sprintf("%d/%s", p.Port, proto)] = true
			}
		} else {
			client = o.Metadata.Name
			for _, p := range s.Ports {
				tp := fmt.Sprint(p.TargetPort)
				if p.TargetPort == nil {
					tp = strconv.Itoa(p.Port)
				}
				clientTargets = append(clientTargets, tp)
			}
		}
	}
	if headless == "" || client == "" {
		t.Fatalf("want a headless Service (clusterIP: None) and a client Service; headless %q, client %q", headless, client)
	}
	if ss.ServiceName != headless {
		t.Errorf("the StatefulSet's serviceName %q is not the headless Service %q", ss.ServiceName, headless)
	}

	// PodDisruptionBudget.
	var pdb pdbSpec
	if err := byKind["PodDisruptionBudget"][0].Spec.Decode(&pdb); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pdb.MaxUnavailable) != "1" {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", pdb.MaxUnavailable)
	}
	if !subset(pdb.Selector.MatchLabels, labels) {
		t.Errorf("PodDisruptionBudget selector %v does not select the pods %v", pdb.Selector.MatchLabels, labels)
	}

	// The node container.
	var node *container
	for i, c := range ss.Template.Spec.Containers {
		if len(c.Command) == 0 && len(c.Args) > 0 && c.Args[0] == "serve" {
			node = &ss.Template.Spec.Containers[i]
		} else if len(c.Command) == 0 || c.Command[0] == "/shardkeeper" {
			t.Errorf("container %s runs shardkeeper but not serve: %q %q", c.Name, c.Command, c.Args)
		}
	}
	if node == nil {
		t.Fatal("no container runs serve (args: [serve, …] with the image's entrypoint)")
	}
	flags, unknown := parseFlags(node.Args[1:], known)
	if len(unknown) > 0 {
		t.Errorf("container %s passes what shardkeeper serve does not accept: %s", node.Name, strings.Join(unknown, ", "))
	}
	env := map[string]string{}
	fieldRefs := map[string]string{}
	for _, e := range node.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fieldRefs[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	envf, unknownEnv := envFlags(env, known)
	if len(unknownEnv) > 0 {
		t.Errorf("container %s sets variables shardkeeper serve does not read: %s", node.Name, strings.Join(unknownEnv, ", "))
	}
	for k, v := range envf {
		if _, dup := flags[k]; dup {
			t.Errorf("container %s sets --%s both as a flag and in the environment", node.Name, k)
		}
		flags[k] = v
	}
	if fieldRefs["SHARDKEEPER_NODE_ID"] != "metadata.name" {
		t.Error("SHARDKEEPER_NODE_ID does not come from the pod name (fieldRef metadata.name): the certificates are named after the pods")
	}
	if fieldRefs["SHARDKEEPER_ADVERTISE_ADDR"] != "status.podIP" {
		t.Error("SHARDKEEPER_ADVERTISE_ADDR does not come from the pod IP (fieldRef status.podIP)")
	}
	for _, k := range []string{"tls-ca", "tls-cert", "tls-key", "gossip-key-file", "data-dir", "join", "bootstrap-expect"} {
		if _, ok := flags[k]; !ok {
			t.Errorf("container %s does not set --%s", node.Name, k)
		}
	}
	if flags["bootstrap-expect"] != strconv.Itoa(ss.Replicas) {
		t.Errorf("--bootstrap-expect %q, want the replicas, %d", flags["bootstrap-expect"], ss.Replicas)
	}
	gossip := port(t, "--gossip-addr", flags["gossip-addr"])
	for _, j := range strings.Split(flags["join"], ",") {
		host, p, err := net.SplitHostPort(j)
		if err != nil {
			t.Errorf("--join entry %q: %v", j, err)
			continue
		}
		if h, _, _ := strings.Cut(host, "."); h != headless && !strings.HasPrefix(h, sts.Metadata.Name+"-") {
			t.Errorf("--join entry %q is neither the headless Service %s nor a pod of it", j, headless)
		}
		if p != gossip {
			t.Errorf("--join entry %q, but the nodes gossip on port %s", j, gossip)
		}
	}
	for _, k := range []string{"gossip-addr", "raft-addr", "remote-addr"} {
		p := port(t, "--"+k, flags[k])
		if !headlessPorts[p+"/TCP"] {
			t.Errorf("the headless Service does not list --%s's port %s/TCP", k, p)
		}
	}
	if !headlessPorts[gossip+"/UDP"] {
		t.Errorf("the headless Service does not list the gossip port %s/UDP", gossip)
	}

	httpPort := port(t, "--http-addr", flags["http-addr"])
	portNames := map[string]string{}
	for _, p := range node.Ports {
		portNames[p.Name] = strconv.Itoa(p.ContainerPort)
	}
	probePort := func(p *probe) string {
		if s := fmt.Sprint(p.HTTPGet.Port); portNames[s] != "" {
			return portNames[s]
		} else {
			return s
		}
	}
	if !slices.ContainsFunc(clientTargets, func(tp string) bool { return tp == httpPort || portNames[tp] == httpPort }) {
		t.Errorf("the client Service %s targets %v, not the HTTP port %s", client, clientTargets, httpPort)
	}
	for _, pc := range []struct {
		name string
		p    *probe
		path string
	}{{"readinessProbe", node.Readiness, "/readyz"}, {"livenessProbe", node.Liveness, "/healthz"}, {"startupProbe", node.Startup, "/healthz"}} {
		switch {
		case pc.p == nil && pc.name == "startupProbe":
		case pc.p == nil || pc.p.HTTPGet == nil:
			t.Errorf("container %s has no HTTP %s", node.Name, pc.name)
		case pc.p.HTTPGet.Path != pc.path:
			t.Errorf("%s checks %s, want %s", pc.name, pc.p.HTTPGet.Path, pc.path)
		case probePort(pc.p) != httpPort:
			t.Errorf("%s is on port %s, not the HTTP port %s", pc.name, probePort(pc.p), httpPort)
		}
	}

	// Volumes: data from the claim template, secrets from the init container's copy.
	mountOf := map[string]string{} // mount path -> volume
	for _, vm := range node.VolumeMounts {
		mountOf[vm.MountPath] = vm.Name
	}
	claims := map[string]bool{}
	for _, c := range ss.VolumeClaimTemplates {
		claims[c.Metadata.Name] = true
	}
	if v := mountOf[flags["data-dir"]]; !claims[v] {
		t.Errorf("--data-dir %s is not a volumeClaimTemplate's volume (mounted: %v, claims: %v)", flags["data-dir"], mountOf, claims)
	}
	secretVolumes := map[string]string{} // volume -> Secret
	for _, v := range ss.Template.Spec.Volumes {
		if v.Secret != nil {
			secretVolumes[v.Name] = v.Secret.SecretName
			if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400 {
				t.Errorf("Secret volume %s: defaultMode is not 0400", v.Name)
			}
		}
	}
	for _, vm := range node.VolumeMounts {
		if secretVolumes[vm.Name] != "" {
			t.Errorf("the node's container mounts Secret volume %s: it should see its own files only, as the init container copies them", vm.Name)
		}
	}
	if len(ss.Template.Spec.InitContainers) != 1 {
		t.Fatalf("%d init containers, want 1 (it hands the node its secret files)", len(ss.Template.Spec.InitContainers))
	}
	steps := k8sCopySteps(t, ss.Template.Spec.InitContainers[0], *node, secretVolumes)
	if !slices.ContainsFunc(steps, func(c k8sCopy) bool { return strings.Contains(c.key, "$POD") }) {
		t.Errorf("the init container does not pick the pod's own certificate by its name: %+v", steps)
	}

	// Every pod, with the Secrets make-secrets.sh makes: every key the init container reads
	// exists, and its configuration is one serve accepts, files and certificate included.
	secrets := makeK8sSecrets(t)
	got := map[string]map[string]string{}
	for _, o := range k8sObjects(t, filepath.Join(secrets, "secrets.yaml")) {
		if o.Kind != "Secret" || o.APIVersion != "v1" {
			t.Errorf("secrets.yaml holds %s %s", o.APIVersion, o.Kind)
		}
		got[o.Metadata.Name] = o.StringData
	}
	for i := 0; i < ss.Replicas; i++ {
		pod := fmt.Sprintf("%s-%d", sts.Metadata.Name, i)
		files := map[string]*installed{}
		for _, c := range steps {
			key := strings.ReplaceAll(c.key, "$POD", pod)
			content, ok := got[c.secret][key]
			if !ok {
				t.Errorf("Secret %s made by make-secrets.sh has no key %s", c.secret, key)
				continue
			}
			files[c.dst] = &installed{c.mode, []byte(content)}
		}
		for _, k := range secretFlags {
			if file := flags[k]; file != "" && files[file] == nil {
				t.Errorf("--%s %s is no file the init container installs", k, file)
			}
		}
		podEnv := map[string]string{}
		for _, e := range node.Env {
			podEnv[e.Name] = e.Value
			switch fieldRefs[e.Name] {
			case "metadata.name":
				podEnv[e.Name] = pod
			case "status.podIP":
				podEnv[e.Name] = fmt.Sprintf("10.0.0.%d", 10+i)
			}
		}
		checkNodeConfig(t, "pod "+pod, node.Args[1:], podEnv, files)
	}

	t.Run("kubectl kustomize", func(t *testing.T) {
		if _, err := exec.LookPath("kubectl"); err != nil {
			t.Skip("kubectl is not installed: the kustomization not built")
		}
		// The kit with the generated Secrets, as a user has it after make-secrets.sh.
		tmp := t.TempDir()
		for _, r := range append([]string{"kustomization.yaml"}, kust.Resources...) {
			src := filepath.Join(dir, r)
			if r == generated {
				src = filepath.Join(secrets, "secrets.yaml")
			}
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(tmp, r)
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.Command("kubectl", "kustomize", tmp).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%v\n%s", err, ee.Stderr)
			}
			t.Fatalf("kubectl kustomize: %v", err)
		}
		kinds := map[string]int{}
		dec := yaml.NewDecoder(bytes.NewReader(out))
		for {
			var o struct {
				Kind string
				Spec struct {
					Template struct {
						Spec struct{ Containers []struct{ Image string } }
					}
				}
			}
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			kinds[o.Kind]++
			for _, c := range o.Spec.Template.Spec.Containers {
				if len(kust.Images) > 0 && c.Image != kust.Images[0].NewName+":"+kust.Images[0].NewTag {
					t.Errorf("rendered image %q, want the kustomization's %s:%s", c.Image, kust.Images[0].NewName, kust.Images[0].NewTag)
				}
			}
		}
		if want := map[string]int{"StatefulSet": 1, "Service": 2, "PodDisruptionBudget": 1, "Secret": 2}; fmt.Sprint(kinds) != fmt.Sprint(want) {
			t.Errorf("kubectl kustomize rendered %v, want %v", kinds, want)
		}
	})
}

// ---- the files init steps install, and the configuration serve makes of it all ----

// installed is a file an init step puts into a node's container.
type installed struct {
	mode    fs.FileMode
	content []byte
}

var composeInstall = regexp.MustCompile(`install -o (\S+) -g (\S+) -m (0[0-7]{3}) (\S+) +(\S+)`)

// composeNodeFiles are the files the secrets-init service installs into the volumes of node
// service node (name), by their path in the node's container, read from secretsDir as
// make-secrets.sh made it. Their owner must be uid.
func composeNodeFiles(t *testing.T, initSvc, node composeService, name, secretsDir, uid string) map[string]*installed {
	t.Helper()
	script := strings.ReplaceAll(strings.Join(initSvc.Command, " "), "$$", "$")
	loop := regexp.MustCompile(`for n in ([^;]+);`).FindStringSubmatch(script)
	if loop == nil || !slices.Contains(strings.Fields(loop[1]), name) {
		t.Errorf("secrets-init does not loop over node %s (for n in …)", name)
		return nil
	}
	expand := func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, "${n}", name), "$n", name)
	}
	initMounts, nodeMounts := initSvc.mounts(), node.mounts()
	files := map[string]*installed{}
	for _, m := range composeInstall.FindAllStringSubmatch(script, -1) {
		owner, src, dst := m[1], expand(m[4]), expand(m[5])
		vol := initMounts[path.Dir(dst)]
		target := ""
		for tgt, v := range nodeMounts {
			if vol != "" && v == vol {
				target = tgt
			}
		}
		if target == "" {
			continue // another node's volume
		}
		if owner != uid {
			t.Errorf("secrets-init installs %s owned by %s, not the image's uid %s", dst, owner, uid)
		}
		if initMounts[path.Dir(src)] != "./secrets" {
			t.Errorf("secrets-init installs %s from %s, which is not in ./secrets (what make-secrets.sh writes)", dst, src)
			continue
		}
		content, err := os.ReadFile(filepath.Join(secretsDir, path.Base(src)))
		if err != nil {
			t.Errorf("secrets-init installs %s from %s, which make-secrets.sh does not make: %v", dst, src, err)
			continue
		}
		mode, _ := strconv.ParseUint(m[3], 8, 32)
		files[path.Join(target, path.Base(dst))] = &installed{fs.FileMode(mode), content}
	}
	return files
}

// k8sCopy is one file the init container copies: a Secret's key ("$POD" for the pod name)
// to dst, a path in the node's container.
type k8sCopy struct {
	secret, key, dst string
	mode             fs.FileMode
}

var k8sInstall = regexp.MustCompile(`install -m (0[0-7]{3}) "?(\S+?)"? +(\S+)`)

// k8sCopySteps reads the init container's script: the Secret keys it copies, into which of
// the node container's files.
func k8sCopySteps(t *testing.T, initC, node container, secretVolumes map[string]string) []k8sCopy {
	t.Helper()
	script := strings.Join(append(slices.Clone(initC.Command), initC.Args...), " ")
	podVar := ""
	for _, e := range initC.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			podVar = e.Name
		}
	}
	if podVar == "" {
		t.Fatal("the init container has no variable holding the pod name")
	}
	initVol := map[string]string{} // mount path -> volume
	for _, vm := range initC.VolumeMounts {
		initVol[vm.MountPath] = vm.Name
	}
	nodePath := map[string]string{} // volume -> mount path
	for _, vm := range node.VolumeMounts {
		nodePath[vm.Name] = vm.MountPath
	}
	var steps []k8sCopy
	for _, m := range k8sInstall.FindAllStringSubmatch(script, -1) {
		src, dst := m[2], m[3]
		secret := secretVolumes[initVol[path.Dir(src)]]
		if secret == "" {
			t.Errorf("the init container installs %s, which is on no Secret volume", src)
			continue
		}
		target := nodePath[initVol[path.Dir(dst)]]
		if target == "" {
			t.Errorf("the init container installs %s, on no volume of the node's container", dst)
			continue
		}
		key := strings.ReplaceAll(strings.ReplaceAll(path.Base(src), "${"+podVar+"}", "$POD"), "$"+podVar, "$POD")
		mode, _ := strconv.ParseUint(m[1], 8, 32)
		steps = append(steps, k8sCopy{secret, key, path.Join(target, path.Base(dst)), fs.FileMode(mode)})
	}
	return steps
}

// checkNodeConfig does what `shardkeeper serve` does with args and env before it opens
// anything: config.Load (every value and cross-field rule, reading the gossip key and token
// files with the node's owner-only rule) and the TLS material as the node loads it, whose
// certificate must name the node id. files are the container's secret files by path; they
// are written to a temporary directory and the paths in args and env rewritten to them.
func checkNodeConfig(t *testing.T, who string, args []string, env map[string]string, files map[string]*installed) {
	t.Helper()
	tmp := t.TempDir()
	local := map[string]string{}
	i := 0
	for p, f := range files {
		i++
		lp := filepath.Join(tmp, fmt.Sprintf("%d-%s", i, path.Base(p)))
		if err := os.WriteFile(lp, f.content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(lp, f.mode); err != nil {
			t.Fatal(err)
		}
		local[p] = lp
	}
	rewrite := func(v string) string {
		if lp, ok := local[v]; ok {
			return lp
		}
		return v
	}
	var a []string
	for _, arg := range args {
		if name, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(name, "-") {
			a = append(a, name+"="+rewrite(v))
		} else {
			a = append(a, rewrite(arg))
		}
	}
	lookup := func(k string) (string, bool) {
		v, ok := env[k]
		return rewrite(v), ok
	}
	cfg, err := config.Load(a, lookup, io.Discard, services.Settings(all.Services())...)
	if err != nil {
		t.Errorf("%s: shardkeeper serve refuses its configuration: %v", who, err)
		return
	}
	if len(cfg.GossipKeyBytes()) == 0 {
		t.Errorf("%s: gossip is not encrypted (no gossip key)", who)
	}
	ca, cert, key, ok, err := cfg.TLSFiles()
	if err != nil || !ok {
		t.Errorf("%s: no mutual TLS between nodes (%v)", who, err)
		return
	}
	peers, err := pki.Load(pki.Files{CA: ca, Cert: cert, Key: key}, func(p string) ([]byte, error) {
		return config.ReadSecretFile(p, "TLS key file", 1<<20)
	})
	if err != nil {
		t.Errorf("%s: its TLS material: %v", who, err)
		return
	}
	if peers.ID() != cfg.NodeID {
		t.Errorf("%s: its certificate is node %q's, but it runs as %q", who, peers.ID(), cfg.NodeID)
	}
}

// ---- make-secrets.sh of the Compose kit ----

func TestComposeMakeSecrets(t *testing.T) {
	out := filepath.Join(t.TempDir(), "secrets")
	script := repoPath("deploy", "compose", "make-secrets.sh")
	runScript(t, script, out)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		checkNodeCert(t, read("ca.pem"), read(n+".pem"), n)
	}
	for _, f := range []string{"n1-key.pem", "n2-key.pem", "n3-key.pem", "ca-key.pem", "gossip.key", "admin.token"} {
		st, err := os.Stat(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %04o: other users can read it", f, st.Mode().Perm())
		}
	}
	if k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(read("gossip.key")))); err != nil || len(k) != 32 {
		t.Errorf("gossip.key is not the base64 of 32 bytes (%d bytes, %v)", len(k), err)
	}
	// A second run keeps what exists.
	before := read("ca.pem")
	runScript(t, script, out)
	if !bytes.Equal(before, read("ca.pem")) {
		t.Error("a second run of make-secrets.sh replaced the CA")
	}
}

// checkNodeCert checks that certPEM is node id's certificate, issued by the CA of caPEM.
func checkNodeCert(t *testing.T, caPEM, certPEM []byte, id string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s: no CA certificate", id)
	}
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		t.Fatalf("%s: no certificate", id)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://shardkeeper/node/"+id {
		t.Errorf("%s's certificate names %v, want spiffe://shardkeeper/node/%s", id, c.URIs, id)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("%s's certificate as a server: %v", id, err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("%s's certificate as a client: %v", id, err)
	}
}
