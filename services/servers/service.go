package servers

import (
	"log/slog"
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/names"
)

// Settings are the service's options: flags, SHARDKEEPER_* variables and YAML keys of the same
// names as every other setting.
var Settings = config.NewSection("server registry", func(c *Config) []config.Option {
	return []config.Option{
		config.Duration(&c.TTL, "server-ttl", "5m", "servers not seen for this long are no longer listed").
			Checked(config.Positive(&c.TTL)),
		config.Int(&c.MaxServers, "max-servers", "1000", "live servers per server registry (>= 1)").
			Checked(config.AtLeast(&c.MaxServers, 1)),
		config.String(&c.TokenFile, "servers-token-file", "", "file holding the bearer token the server registry's writes require, readable by its owner only; empty: writes are open").
			Checked(c.loadToken),
	}
})

// Load reads the token file, as loading the configuration does: for a configuration built in
// code (tests).
func (c *Config) Load() error { return c.loadToken() }

// loadToken reads --servers-token-file. Its errors name the file, never its content.
func (c *Config) loadToken() error {
	c.token = ""
	if c.TokenFile == "" {
		return nil
	}
	t, err := config.ReadToken(c.TokenFile)
	c.token = t
	return err
}

// NamesKindName is the kind of the actor holding the server registries' names (package names).
const NamesKindName = "server-registries"

// codes are the error codes of the registry's actors and routes, with their HTTP statuses.
var codes = map[string]int{
	"unknown_server": http.StatusNotFound,
	"registry_full":  http.StatusServiceUnavailable,
}

// Service is the server registry (the contract's "Server registry").
func Service() services.Service {
	return services.Service{
		Name:     "servers",
		Settings: Settings,
		Kinds: func(cfg config.Config, _ services.Env) []actors.Kind {
			o := Settings.Get(cfg)
			if config.WeakToken(o.token) {
				slog.Warn("the servers token is weak: shorter than 32 bytes", "min_bytes", config.MinTokenBytes)
			}
			return []actors.Kind{Kind(o), names.Kind(NamesKindName)}
		},
		Routes: routes,
		Codes:  codes,
	}
}
