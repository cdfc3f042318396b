package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
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

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/pki"
)

const gossipKeyUsage = `Usage: shardkeeper gossip-key <generate|list|install|use|remove> [flags]

Rotates the gossip encryption key of a running cluster, as three steps each applied to
every member: install the new key, use it, remove the old one. A member decrypts with any
installed key, so no member is cut off at any step. Each step waits until every alive member
shows it, and fails naming those that do not.

  generate   print a new random key (base64 of 32 bytes)
  list       print every member's keys (fingerprints; the key in use first)
  install    add --key-file's key to every member
  use        make it the key every member encrypts with
  remove     remove it from every member (refused while a member uses it)

Flags:
  --addr host:port      HTTP address of a node serving the admin endpoints (its
                        --admin-addr, if set) (default "127.0.0.1:8080")
  --key-file path       file holding the key, readable by its owner only
  --token-file path     file holding the admin token (default: $SHARDKEEPER_ADMIN_TOKEN)
`

// gossipKey runs "shardkeeper gossip-key".
func gossipKey(args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("gossip-key: missing operation")}
	}
	op := args[0]
	fs := flag.NewFlagSet("gossip-key", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "127.0.0.1:8080", "")
	keyFile := fs.String("key-file", "", "")
	tokenFile := fs.String("token-file", "", "")
	if op == "-h" || op == "--help" || op == "help" {
		fmt.Fprint(out, gossipKeyUsage)
		return flag.ErrHelp
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(out, gossipKeyUsage)
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("gossip-key: unexpected argument %q", fs.Arg(0))}
	}
	switch op {
	case "generate":
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		fmt.Fprintln(out, base64.StdEncoding.EncodeToString(k))
		return nil
	case "list", "install", "use", "remove":
	default:
		return usageError{fmt.Errorf("gossip-key: unknown operation %q", op)}
	}
	token := os.Getenv("SHARDKEEPER_ADMIN_TOKEN")
	if *tokenFile != "" {
		t, err := config.ReadToken(*tokenFile)
		if err != nil {
			return err
		}
		token = t
	}
	method, body := http.MethodGet, []byte(nil)
	if op != "list" {
		if *keyFile == "" {
			return usageError{fmt.Errorf("gossip-key %s: --key-file is required", op)}
		}
		k, err := config.ReadSecretFile(*keyFile, "key file", 4096)
		if err != nil {
			return err
		}
		body, _ = json.Marshal(map[string]string{"op": op, "key": strings.TrimSpace(string(k))})
		method = http.MethodPost
	}
	var res struct {
		Complete bool `json:"complete"`
		Members  []struct {
			NodeID string   `json:"node_id"`
			State  string   `json:"state"`
			Keys   []string `json:"keys"`
			Done   bool     `json:"done"`
		} `json:"members"`
		Message string `json:"message"`
	}
	status, err := adminCall(*addr, method, "/v1/cluster/gossip-keys", token, body, &res)
	if err != nil {
		return fmt.Errorf("gossip-key %s: %w", op, err)
	}
	if status >= 300 {
		return fmt.Errorf("gossip-key %s: the node at %s answered %d: %s", op, *addr, status, res.Message)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	head := "NODE\tSTATE\tKEYS (IN USE FIRST)"
	if op != "list" {
		head += "\tDONE"
	}
	fmt.Fprintln(tw, head)
	var missing []string
	for _, m := range res.Members {
		row := fmt.Sprintf("%s\t%s\t%s", m.NodeID, m.State, strings.Join(m.Keys, " "))
		if op != "list" {
			row += fmt.Sprintf("\t%v", m.Done)
			if !m.Done && m.State != "failed" && m.State != "left" {
				missing = append(missing, m.NodeID)
			}
		}
		fmt.Fprintln(tw, row)
	}
	_ = tw.Flush()
	if !res.Complete {
		return fmt.Errorf("gossip-key %s: not yet shown by %s; run list to follow it, or repeat the step", op, strings.Join(missing, ", "))
	}
	return nil
}

// adminCall sends one request to a node's HTTP API and decodes the JSON answer into out.
func adminCall(addr, method, path, token string, body []byte, out any) (int, error) {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach a node at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return resp.StatusCode, fmt.Errorf("the node at %s answered %s with an unreadable body", addr, resp.Status)
	}
	return resp.StatusCode, nil
}

const tlsUsage = `Usage: shardkeeper tls <ca|node|client> --dir DIR [flags]

Makes the TLS material of a cluster (ECDSA P-256 keys, written readable by their owner
only; an existing file is never replaced):

  ca       a CA: DIR/ca.pem and DIR/ca-key.pem (keep ca-key.pem off the nodes)
  node     a node certificate for --name (its --node-id): DIR/<name>.pem, DIR/<name>-key.pem
           with SAN URI spiffe://shardkeeper/node/<name>, key usages ServerAuth+ClientAuth
  client   a client certificate (ClientAuth only; refused on every peer port)

Flags:
  --dir DIR          directory of the CA and the certificates (default ".")
  --name NAME        node id or client name
  --hosts h1,h2      DNS names and IP addresses to add as SANs
  --validity D       how long the certificate is valid (default 8760h; CA 87600h)
`

// tlsCmd runs "shardkeeper tls".
func tlsCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("tls: missing what to make (ca, node or client)")}
	}
	what := args[0]
	if what == "-h" || what == "--help" || what == "help" {
		fmt.Fprint(out, tlsUsage)
		return flag.ErrHelp
	}
	fs := flag.NewFlagSet("tls", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", ".", "")
	name := fs.String("name", "", "")
	hosts := fs.String("hosts", "", "")
	validity := fs.Duration("validity", 0, "")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(out, tlsUsage)
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("tls: unexpected argument %q", fs.Arg(0))}
	}
	if *validity < 0 {
		return usageError{errors.New("tls: --validity must be positive")}
	}
	switch what {
	case "ca":
		if *validity == 0 {
			*validity = 10 * 365 * 24 * time.Hour
		}
		if err := pki.WriteCA(*dir, "shardkeeper CA", *validity); err != nil {
			return fmt.Errorf("tls ca: %w", err)
		}
		cert, key := pki.CAFiles(*dir)
		fmt.Fprintf(out, "wrote %s and %s\n", cert, key)
		return nil
	case "node", "client":
	default:
		return usageError{fmt.Errorf("tls: unknown kind %q (ca, node or client)", what)}
	}
	if *name == "" {
		return usageError{fmt.Errorf("tls %s: --name is required", what)}
	}
	if *validity == 0 {
		*validity = 365 * 24 * time.Hour
	}
	req := pki.Request{Role: pki.RoleNode, Name: *name, Validity: *validity}
	if what == "client" {
		req.Role = pki.RoleClient
	}
	if *hosts != "" {
		req.Hosts = strings.Split(*hosts, ",")
	}
	f, err := pki.WriteCert(*dir, req)
	if err != nil {
		return fmt.Errorf("tls %s: %w", what, err)
	}
	fmt.Fprintf(out, "wrote %s and %s\n", f.Cert, f.Key)
	if what == "node" {
		fmt.Fprintf(out, "start the node with --node-id %s --tls-ca %s --tls-cert %s --tls-key %s\n", *name, f.CA, f.Cert, f.Key)
	}
	return nil
}
