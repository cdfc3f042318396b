package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/shardkeeper/shardkeeper/config"
)

// Serve is a process's whole life as a node: it parses args (flags, SHARDKEEPER_* environment,
// --config file), starts the node with the options options(cfg) gives, and on SIGTERM or
// SIGINT shuts down gracefully. It returns nil after a clean shutdown (exit 0), or the
// configuration or start-up error (which names the flag at fault).
func Serve(args []string, options func(config.Config) Options) error {
	cfg, err := config.Load(args, os.LookupEnv, os.Stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.SlogLevel()}))
	slog.SetDefault(logger)
	opts := options(cfg)
	opts.Logger = logger
	n, err := Start(cfg, opts)
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
