// Command shardkeeper runs a shardkeeper node (serve) and operator subcommands (status).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
)

const usage = `usage: shardkeeper <command> [flags]

commands:
  serve    run a node (shardkeeper serve --help lists its flags)
  status   print a node's view of the cluster (--addr host:port)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "status":
		err = status(os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardkeeper:", err)
		os.Exit(2)
	}
}

func serve(args []string) error {
	return node.Serve(args, func(cfg config.Config) node.Options {
		return node.Options{Kinds: api.Kinds(cfg), Routes: func(mux *http.ServeMux, c api.Caller) { api.Register(mux, c, cfg) }}
	})
}

func status(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "HTTP address of any node")
	if err := fs.Parse(args); err != nil {
		return err
	}
	base := *addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(base + "/v1/cluster")
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status: %s: %s", resp.Status, b)
	}
	var st api.ClusterStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return fmt.Errorf("status: decode: %w", err)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "node %s\n\nMEMBER\tSTATE\tHTTP\n", st.NodeID)
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.NodeID, m.State, m.HTTPAddr)
	}
	fmt.Fprintf(tw, "\nPARTITION\tLEADER\tREPLICAS\tAPPLIED\n")
	for _, p := range st.Partitions {
		leader := p.Leader
		if leader == "" {
			leader = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\n", p.ID, leader, strings.Join(p.Replicas, ","), p.AppliedIndex)
	}
	return tw.Flush()
}
