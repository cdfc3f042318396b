// Command fakenear runs the fake NEAR JSON-RPC node of package fakenear as a process, for tests
// in other processes: one chain, one or more RPC endpoints, faults from flags or from the
// /fake/ admin endpoints. See test/fakenear/README.md.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shardkeeper/shardkeeper/test/fakenear"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fakenear:", err)
		os.Exit(1)
	}
}

// addresses is what --addr-file and the first line of stdout hold once every listener is up.
type addresses struct {
	Endpoints []fakenear.EndpointInfo `json:"endpoints"`
	Admin     string                  `json:"admin,omitempty"`
}

func run(args []string) error {
	fs := flag.NewFlagSet("fakenear", flag.ContinueOnError)
	var (
		listen        = fs.String("listen", "127.0.0.1:3030", "comma-separated `addresses` of the RPC endpoints (port 0 picks a free one)")
		forwardDelay  = fs.String("forward-delay", "", "comma-separated blocks each endpoint holds transactions before the pool (default 0 each)")
		adminListen   = fs.String("admin-listen", "", "`address` of a separate admin listener without latency (every endpoint serves /fake/ too)")
		blockInterval = fs.Duration("block-interval", fakenear.DefaultBlockInterval, "block interval; 0 produces blocks only on POST /fake/blocks")
		validity      = fs.Uint64("validity-period", fakenear.DefaultValidityPeriod, "transaction validity period in blocks")
		finalityLag   = fs.Uint64("finality-lag", fakenear.DefaultFinalityLag, "blocks the final block trails the head")
		genesis       = fs.Uint64("genesis-height", fakenear.DefaultGenesisHeight, "height of the first block")
		pollTimeout   = fs.Duration("poll-timeout", fakenear.DefaultPollTimeout, "how long send_tx and tx wait before TIMEOUT_ERROR")
		chainID       = fs.String("chain-id", fakenear.DefaultChainID, "chain id")
		seed          = fs.Uint64("seed", 1, "seed of the fault decisions and jitter")
		latency       = fs.Duration("latency", 0, "one-way network delay of every connection")
		jitter        = fs.Duration("jitter", 0, "random extra one-way delay, up to this")
		dropRate      = fs.Float64("drop-rate", 0, "rate of requests handled, then answered by closing the connection")
		timeoutRate   = fs.Float64("timeout-rate", 0, "rate of requests answered TIMEOUT_ERROR (transactions still accepted)")
		loseRate      = fs.Float64("lose-rate", 0, "rate of transactions accepted and then lost")
		foreignRate   = fs.Float64("foreign-nonce-rate", 0, "rate of transactions whose nonce a foreign sender takes first")
		statusRate    = fs.Float64("status-rate", 0, "rate of requests answered with --status-code")
		statusCode    = fs.Int("status-code", 503, "HTTP status of --status-rate")
		statusAfter   = fs.Bool("status-after", false, "answer --status-code after handling the request (default: instead of handling it)")
		accountsPath  = fs.String("accounts", "", "JSON `file` of accounts to create: {\"accounts\":[{\"account_id\",\"balance\",\"keys\":[{\"public_key\",\"permission\",\"nonce\"}]}]}")
		upperAtRPC    = fs.Bool("nonce-upper-bound-at-rpc", false, "answer NonceTooLarge from send_tx (nearcore drops such transactions at inclusion)")
		legacyIDs     = fs.Bool("legacy-account-id-check", false, "refuse invalid account ids with InvalidReceiverId/InvalidSignerId instead of a PARSE_ERROR")
		addrFile      = fs.String("addr-file", "", "`file` to write the listening addresses to (JSON), once listening")
		logLevel      = fs.String("log-level", "info", "debug, info, warn or error")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg := fakenear.Config{
		ChainID: *chainID, GenesisHeight: *genesis, BlockInterval: *blockInterval, Manual: *blockInterval == 0,
		ValidityPeriod: *validity, FinalityLag: *finalityLag, PollTimeout: *pollTimeout, Seed: *seed,
		NonceUpperBoundAtRPC: *upperAtRPC, LegacyAccountIDCheck: *legacyIDs, Logger: log,
	}
	if *accountsPath != "" {
		accounts, err := fakenear.LoadAccounts(*accountsPath)
		if err != nil {
			return err
		}
		cfg.Accounts = accounts
	}
	faults := fakenear.Faults{Latency: *latency, Jitter: *jitter}
	for _, r := range []struct {
		kind fakenear.FaultKind
		rate float64
	}{{fakenear.FaultDropResponse, *dropRate}, {fakenear.FaultTimeout, *timeoutRate}, {fakenear.FaultLose, *loseRate},
		{fakenear.FaultForeignNonce, *foreignRate}, {fakenear.FaultStatus, *statusRate}} {
		if r.rate > 0 {
			rule := fakenear.FaultRule{Kind: r.kind, Rate: r.rate}
			if r.kind == fakenear.FaultStatus {
				rule.Status, rule.After = *statusCode, *statusAfter
			}
			faults.Rules = append(faults.Rules, rule)
		}
	}

	addrs := splitList(*listen)
	if len(addrs) == 0 {
		return errors.New("--listen: no address")
	}
	delays := splitList(*forwardDelay)
	if len(delays) > len(addrs) {
		return fmt.Errorf("--forward-delay: %d values for %d endpoints", len(delays), len(addrs))
	}

	f, err := fakenear.New(cfg)
	if err != nil {
		return err
	}
	defer f.Close()
	var out addresses
	for i, addr := range addrs {
		ec := fakenear.EndpointConfig{Faults: faults}
		if i < len(delays) {
			if ec.ForwardDelayBlocks, err = strconv.ParseUint(delays[i], 10, 64); err != nil {
				return fmt.Errorf("--forward-delay: %w", err)
			}
		}
		e, err := f.Listen(addr, ec)
		if err != nil {
			return err
		}
		out.Endpoints = append(out.Endpoints, fakenear.EndpointInfo{Name: e.Name(), URL: e.URL(), ForwardDelayBlocks: ec.ForwardDelayBlocks})
	}
	if *adminListen != "" {
		ln, err := net.Listen("tcp", *adminListen)
		if err != nil {
			return fmt.Errorf("--admin-listen: %w", err)
		}
		srv := &http.Server{Handler: f.AdminHandler(), ReadHeaderTimeout: time.Minute}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("fakenear: admin listener stopped", "err", err)
			}
		}()
		defer srv.Close()
		out.Admin = "http://" + ln.Addr().String() + "/fake/"
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
	if *addrFile != "" {
		// Written whole under another name, then renamed: a reader never sees half a file.
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, append(line, '\n'), 0o644); err != nil {
			return fmt.Errorf("--addr-file: %w", err)
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			return fmt.Errorf("--addr-file: %w", err)
		}
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	log.Info("fakenear: stopping", "signal", s.String())
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
