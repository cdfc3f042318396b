// Command testnode is `shardkeeper serve` with the test kinds registered: it parses the same
// flags, logs JSON to stderr, exits 0 after a graceful shutdown on SIGTERM or SIGINT, and exits 2
// with a message when the configuration is invalid or the node cannot start.
//
// Besides the node's operational endpoints it serves one generic route,
//
//	POST /test/{kind}/{id}/{method}
//
// whose body (at most 64 KiB) is the Request.Body of a runtime call. It answers 200 with the
// reply bytes, or the error body of api.WriteError (503 with Retry-After when unavailable).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
	"github.com/shardkeeper/shardkeeper/test/testkinds"
)

// maxBody is the largest request body accepted by the test route.
const maxBody = 64 << 10

func main() {
	err := run(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testnode:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	cfg, err := config.Load(args, os.LookupEnv, os.Stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.SlogLevel()}))
	slog.SetDefault(logger)
	routes := func(mux *http.ServeMux, rt api.Caller) {
		mux.HandleFunc("POST /test/{kind}/{id}/{method}", func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
			if err != nil {
				api.WriteError(w, &api.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: err.Error()})
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), cfg.RequestTimeout)
			defer cancel()
			reply, err := rt.Call(ctx, r.PathValue("kind"), r.PathValue("id"),
				actors.Request{Method: r.PathValue("method"), Body: body})
			if err != nil {
				api.WriteError(w, err)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(reply)
		})
	}
	n, err := node.Start(cfg, node.Options{Logger: logger, Kinds: []actors.Kind{testkinds.Counter()}, Routes: routes})
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	case err := <-n.Done():
		logger.Error("http server stopped", "error", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownDrain+cfg.RequestTimeout+5*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}
