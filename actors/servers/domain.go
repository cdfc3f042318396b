package servers

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/kit"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/domain"
)

// Settings are the domain's options: flags, SHARDKEEPER_* variables and YAML keys of the same
// names as every other setting.
var Settings = config.NewSection("server registry", func(c *Config) []config.Option {
	return []config.Option{
		config.Duration(&c.TTL, "server-ttl", "5m", "servers not seen for this long are no longer listed").
			Checked(config.Positive(&c.TTL)),
		config.Int(&c.MaxServers, "max-servers", "1000", "live servers per server registry (>= 1)").
			Checked(config.AtLeast(&c.MaxServers, 1)),
	}
})

// NamesKindName is the kind of the actor holding the server registries' names (kit.Names).
const NamesKindName = "server-registries"

// codes are the error codes of the registry's actors and routes, with their HTTP statuses.
var codes = map[string]int{
	"unknown_server": http.StatusNotFound,
	"registry_full":  http.StatusServiceUnavailable,
}

// Domain is the server registry (the contract's "Server registry").
func Domain() domain.Domain {
	return domain.Domain{
		Name:     "servers",
		Settings: Settings,
		Kinds: func(cfg config.Config, _ domain.Env) []actors.Kind {
			return []actors.Kind{Kind(Settings.Get(cfg)), kit.NamesKind(NamesKindName)}
		},
		Routes: routes,
		Codes:  codes,
	}
}
