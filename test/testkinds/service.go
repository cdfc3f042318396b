package testkinds

import (
	"context"
	"io"
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/services"
)

// maxBody is the largest request body the test route accepts.
const maxBody = 64 << 10

// Service serves the test kinds (the counter) to multi-process tests, through one generic route,
//
//	POST /test/{kind}/{id}/{method}
//
// whose body (at most 64 KiB) is the Request.Body of a runtime call. It answers 200 with the
// reply bytes, or the error body of api.Codes.WriteError (503 with Retry-After when unavailable).
func Service() services.Service {
	return services.Service{
		Name:   "test",
		Kinds:  func(config.Config, services.Env) []actors.Kind { return []actors.Kind{Counter()} },
		Routes: routes,
	}
}

func routes(env services.Env, cfg config.Config) []api.Route {
	caller, codes := env.Caller, env.Codes
	return []api.Route{{Pattern: "POST /test/{kind}/{id}/{method}", Handler: func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			api.WriteAPIError(w, &api.Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", Message: err.Error()})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), cfg.RequestTimeout)
		defer cancel()
		reply, err := caller.Call(ctx, r.PathValue("kind"), r.PathValue("id"),
			actors.Request{Method: r.PathValue("method"), Body: body})
		if err != nil {
			codes.WriteError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(reply)
	}}}
}
