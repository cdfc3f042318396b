// Command shardkeeper runs a shardkeeper node (serve) and operator subcommands (status,
// gossip-key, tls, chain, version).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/shardkeeper/shardkeeper/buildinfo"
	"github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
	"github.com/shardkeeper/shardkeeper/services"
)

const usage = `usage: shardkeeper <command> [flags]

commands:
  serve       run a node (shardkeeper serve --help lists its flags)
  status      print a node's view of the cluster (shardkeeper status --help)
  gossip-key  rotate the gossip encryption key of a running cluster (shardkeeper gossip-key --help)
  tls         make a cluster CA and node certificates (shardkeeper tls --help)
  chain       check an attestation chain on Arweave (shardkeeper chain --help)
  version     print the version, commit and Go version (also shardkeeper --version, -v)

"shardkeeper help <command>" is "shardkeeper <command> --help".
`

const versionUsage = `Usage: shardkeeper version

Prints the version, the commit and the Go version of this binary (also shardkeeper --version
and shardkeeper -v).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command line: it returns the exit status, 0 on success, 1 when a
// subcommand failed, 2 for a usage error and for any error of serve (a node that cannot
// start or stop cleanly).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		if err = serve(args[1:], os.Environ(), stdout, stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "shardkeeper:", err)
			return 2
		}
		return 0
	case "status":
		err = status(args[1:], stdout, time.Now)
	case "gossip-key":
		err = gossipKey(args[1:], stdout)
	case "tls":
		err = tlsCmd(args[1:], stdout)
	case "chain":
		err = chainCmd(args[1:], stdout, stderr)
	case "version", "--version", "-version", "-v":
		switch {
		case len(args) > 1 && isHelp(args[1]):
			fmt.Fprint(stdout, versionUsage)
		case len(args) > 1:
			err = usageError{fmt.Errorf("%s takes no arguments", args[0])}
		default:
			fmt.Fprintln(stdout, buildinfo.Get())
		}
	case "-h", "--help", "-help", "help":
		if args[0] == "help" && len(args) > 1 && args[1] != "help" {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		help := "shardkeeper --help"
		switch args[0] {
		case "status", "gossip-key", "tls", "chain":
			help = "shardkeeper " + args[0] + " --help"
		}
		fmt.Fprintf(stderr, "shardkeeper: %v (see %s)\n", err, help)
		return 2
	default:
		fmt.Fprintln(stderr, "shardkeeper:", err)
		return 1
	}
}

// isHelp reports whether arg asks for help, as the flag package takes it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help", "help":
		return true
	}
	return false
}

// serve runs a node. The settings are first read without their checks (config.Preview), to
// print --help on stdout and to warn, in the format of the node's logs, about SHARDKEEPER_*
// variables of environ that set no option; node.Serve then loads them for good and reports
// their errors.
func serve(args, environ []string, stdout, stderr io.Writer) error {
	opts := node.Options{Services: served()}
	groups := services.Settings(opts.Services)
	cfg, err := config.Preview(args, lookupIn(environ), stdout, groups...)
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	if err != nil {
		cfg = config.Default() // the error is node.Serve's to report; warn in the default format
	}
	warnUnknownEnv(slog.New(node.LogHandler(stderr, cfg)), config.UnknownEnv(environ, groups...))
	return node.Serve(args, opts)
}

// warnUnknownEnv logs one warning for each variable of unknown. Such a variable is not an
// error: the environment of a process is shared with other programs and inherited from
// shells, and a variable may be meant for another version of shardkeeper; a flag, given to
// this command alone, that it does not know stops it instead.
func warnUnknownEnv(logger *slog.Logger, unknown []config.UnknownVar) {
	for _, u := range unknown {
		if u.Closest != "" {
			logger.Warn("an environment variable sets no option: ignored; is it a misspelling?", "variable", u.Name, "did_you_mean", u.Closest)
			continue
		}
		logger.Warn("an environment variable sets no option: ignored", "variable", u.Name)
	}
}

// lookupIn is os.LookupEnv over environ ("NAME=value" entries): the first entry of a name
// wins, as it does for os.LookupEnv.
func lookupIn(environ []string) func(string) (string, bool) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := m[k]; !dup {
				m[k] = v
			}
		}
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// usageError is a mistake on the command line (exit status 2), not a failure of the command.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

const statusUsage = `Usage: shardkeeper status [members] [--addr host:port] [--json]

Prints one node's view of the cluster: the members as gossip sees them, and every
partition's Raft group, leader, voters, non-voters and applied index. "status members" prints the
members only.

Flags:
`

// statusFlags are status's flags, listed in the help in this order.
var statusFlags = []struct{ name, arg, help, def string }{
	{"addr", "host:port", "HTTP address of any node", "127.0.0.1:8080"},
	{"json", "", "print the node's /v1/cluster response as JSON, indented", ""},
}

// status prints a node's view of the cluster to out; now is the clock that says how long
// members have been in their state.
func status(args []string, out io.Writer, now func() time.Time) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by run, help by us
	addr := fs.String("addr", statusFlags[0].def, statusFlags[0].help)
	asJSON := fs.Bool("json", false, statusFlags[1].help)

	// Flags may come before or after the view name: parse, take one positional argument,
	// parse the rest.
	var positional []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printStatusUsage(out)
				return err
			}
			return usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		positional, rest = append(positional, fs.Arg(0)), fs.Args()[1:]
	}
	membersOnly := false
	switch {
	case len(positional) == 1 && positional[0] == "members":
		membersOnly = true
	case len(positional) > 0:
		return usageError{fmt.Errorf("status: unexpected argument %q", positional[0])}
	}

	body, err := fetchCluster(*addr)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(out, *addr, body, membersOnly)
	}
	var view clusterView
	if err := json.Unmarshal(body, &view); err != nil {
		return fmt.Errorf("status: the node at %s sent an unreadable /v1/cluster body: %w", *addr, err)
	}
	if membersOnly {
		return printMembers(out, view.Members, now())
	}
	fmt.Fprintf(out, "view of node %s\n\n", view.NodeID)
	if err := printMembers(out, view.Members, now()); err != nil {
		return err
	}
	fmt.Fprintln(out)
	return printPartitions(out, view.Partitions)
}

func printStatusUsage(w io.Writer) {
	var b bytes.Buffer
	b.WriteString(statusUsage)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, f := range statusFlags {
		def := ""
		if f.def != "" {
			def = fmt.Sprintf(" (default %q)", f.def)
		}
		fmt.Fprintf(tw, "  --%s %s\t%s%s\n", f.name, f.arg, f.help, def)
	}
	_ = tw.Flush()
	_, _ = w.Write(b.Bytes())
}

// fetchCluster returns the body of GET /v1/cluster from the node at addr, with errors that
// say which address failed and how.
func fetchCluster(addr string) ([]byte, error) {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	const timeout = 5 * time.Second
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get(strings.TrimSuffix(base, "/") + "/v1/cluster")
	if err != nil {
		var ne net.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return nil, fmt.Errorf("status: no node is listening at %s (connection refused)", addr)
		case errors.As(err, &ne) && ne.Timeout():
			return nil, fmt.Errorf("status: the node at %s did not answer within %v", addr, timeout)
		}
		return nil, fmt.Errorf("status: cannot reach a node at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("status: reading the answer of %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: the node at %s answered %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// printJSON writes the body as received, indented, so that fields this binary does not know
// survive; membersOnly narrows it to the members array.
func printJSON(out io.Writer, addr string, body []byte, membersOnly bool) error {
	if membersOnly {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			return fmt.Errorf("status: the node at %s sent an unreadable /v1/cluster body: %w", addr, err)
		}
		body = top["members"]
		if body == nil {
			body = []byte("[]")
		}
	}
	var b bytes.Buffer
	if err := json.Indent(&b, body, "", "  "); err != nil {
		return fmt.Errorf("status: the node at %s sent an unreadable /v1/cluster body: %w", addr, err)
	}
	b.WriteByte('\n')
	_, err := out.Write(b.Bytes())
	return err
}

// clusterView is the body of GET /v1/cluster as this command reads it. Every field may be
// absent (a node of another version): the tables then show "-" or fall back.
type clusterView struct {
	NodeID     string          `json:"node_id"`
	Members    []memberView    `json:"members"`
	Partitions []partitionView `json:"partitions"`
}

type memberView struct {
	NodeID     string `json:"node_id"`
	ServerID   string `json:"server_id"`
	State      string `json:"state"`
	StateSince int64  `json:"state_since"` // unix milliseconds
	HTTPAddr   string `json:"http_addr"`
}

type partitionView struct {
	ID              uint32            `json:"id"`
	Group           *uint32           `json:"group"` // nil from a node that predates Raft groups
	Leader          string            `json:"leader"`
	Replicas        []string          `json:"replicas"`
	Voters          []string          `json:"voters"`
	NonVoters       []string          `json:"non_voters"`
	AppliedIndex    uint64            `json:"applied_index"`
	Lag             map[string]uint64 `json:"lag"`
	UnderReplicated bool              `json:"under_replicated"`
}

func printMembers(out io.Writer, members []memberView, now time.Time) error {
	rows := [][]string{{"NODE", "STATE", "FOR", "HTTP"}}
	for _, m := range members {
		rows = append(rows, []string{dash(m.NodeID), dash(m.State), since(m.StateSince, now), dash(m.HTTPAddr)})
	}
	return writeTable(out, rows)
}

func printPartitions(out io.Writer, partitions []partitionView) error {
	rows := [][]string{{"ID", "GROUP", "LEADER", "VOTERS", "NON-VOTERS", "APPLIED", ""}}
	for _, p := range partitions {
		voters := p.Voters
		if voters == nil && p.NonVoters == nil {
			voters = p.Replicas // a node that reports replicas only
		}
		group := "-"
		if p.Group != nil {
			group = cluster.GroupName(*p.Group) // as logs name it
		}
		rows = append(rows, []string{strconv.FormatUint(uint64(p.ID), 10), group, dash(p.Leader), list(voters),
			list(p.NonVoters), strconv.FormatUint(p.AppliedIndex, 10), notes(p)})
	}
	return writeTable(out, rows)
}

// writeTable writes rows as aligned columns, without trailing blanks where a row's last
// cells are empty.
func writeTable(out io.Writer, rows [][]string) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	lines := strings.SplitAfter(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \n")
	}
	_, err := io.WriteString(out, strings.Join(lines[:len(lines)-1], "\n")+"\n")
	return err
}

// notes is the partition's last column: what an operator should look at.
func notes(p partitionView) string {
	var n []string
	if p.UnderReplicated {
		n = append(n, "under-replicated")
	}
	return strings.Join(n, " ")
}

// since is how long ago the unix-millisecond time ms was, to the second ("12s", "3m4s"), or
// "-" when the node did not say.
func since(ms int64, now time.Time) string {
	if ms <= 0 {
		return "-"
	}
	d := now.Sub(time.UnixMilli(ms)).Truncate(time.Second)
	if d < 0 {
		d = 0 // the node's clock is ahead of ours
	}
	return d.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func list(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	return strings.Join(ids, ",")
}
