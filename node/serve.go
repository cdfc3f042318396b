package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/services"
)

// Serve is a process's whole life as a node: it parses args (flags, SHARDKEEPER_* environment,
// --config file; the core settings and those of opts.Services), starts the node with opts, and
// on SIGTERM or SIGINT shuts down gracefully. It returns nil after a clean shutdown (exit 0),
// or the configuration or start-up error (which names the flag at fault).
func Serve(args []string, opts Options) error {
	cfg, err := config.Load(args, os.LookupEnv, os.Stderr, services.Settings(opts.Services)...)
	if err != nil {
		return err
	}
	logger := slog.New(LogHandler(os.Stderr, cfg))
	slog.SetDefault(logger)
	opts.Logger = logger
	if config.WeakToken(cfg.AdminToken) {
		logger.Warn("the admin token is weak: shorter than 32 bytes", "min_bytes", config.MinTokenBytes)
	}
	n, err := Start(cfg, opts)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	var failed error
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	case failed = <-n.Done():
		logger.Error("stopping", "error", failed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownDrain+cfg.LeaveTimeout+cfg.RequestTimeout+5*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		return errors.Join(failed, fmt.Errorf("shutdown: %w", err))
	}
	logger.Info("stopped")
	return failed
}

// LogHandler is the handler of every log line of the process, on w: JSON lines (the
// default, for log collectors) or slog's key=value text (--log-format text, for people), at
// cfg's level. The format was validated with the configuration.
func LogHandler(w io.Writer, cfg config.Config) slog.Handler {
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	if cfg.LogFormat == "text" {
		return slog.NewTextHandler(w, opts)
	}
	return slog.NewJSONHandler(w, opts)
}
