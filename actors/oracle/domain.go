package oracle

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/domain"
)

// Settings are the domain's options: flags, SHARDKEEPER_* variables and YAML keys of the same
// names as every other setting. Retention is not one: the contract fixes it.
var Settings = config.NewSection("nonce oracle", func(c *Config) []config.Option {
	return []config.Option{
		config.Duration(&c.TTL, "oracle-nonce-ttl", "1h", "lifetime of an oracle nonce").Checked(config.Positive(&c.TTL)),
	}
})

// codes are the error codes of the oracle's actors and routes, with their HTTP statuses.
var codes = map[string]int{
	"org_mismatch":  http.StatusForbidden,
	"unknown_nonce": http.StatusNotFound,
	"nonce_used":    http.StatusConflict,
	"nonce_expired": http.StatusGone,
}

// Domain is the nonce oracle (the contract's "Nonce oracle").
func Domain() domain.Domain {
	return domain.Domain{
		Name:     "oracle",
		Settings: Settings,
		Kinds:    func(cfg config.Config, _ domain.Env) []actors.Kind { return []actors.Kind{Kind(Settings.Get(cfg))} },
		Routes:   routes,
		Codes:    codes,
	}
}
