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
	"net/http"
	"os"

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
	return node.Serve(args, func(cfg config.Config) node.Options {
		routes := func(mux *http.ServeMux, rt api.Caller) {
			mux.HandleFunc("POST /test/{kind}/{id}/{method}", func(w http.ResponseWriter, r *http.Request) {
				body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
				if err != nil {
					api.WriteError(w, &api.Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", Message: err.Error()})
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
		return node.Options{Kinds: []actors.Kind{testkinds.Counter()}, Routes: routes}
	})
}
