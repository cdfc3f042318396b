package oracle

import (
	"net/http"
	"strconv"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/services"
)

// Settings are the service's options: flags, SHARDKEEPER_* variables and YAML keys of the same
// names as every other setting. Retention is not one: the contract fixes it.
var Settings = config.NewSection("nonce oracle", func(c *Config) []config.Option {
	return []config.Option{
		config.Duration(&c.TTL, "oracle-nonce-ttl", "1h", "lifetime of an oracle nonce").Checked(config.Positive(&c.TTL)),
		config.Int(&c.MaxOutstanding, "oracle-max-outstanding", strconv.Itoa(DefaultMaxOutstanding),
			"unused nonces one organisation may hold at once, counted by each of the 256 shards, which admits a 256th of it (at least 1); an unused nonce counts until it is removed, the retention after it expires; past it an issue answers 429 too_many_outstanding (the default is far above honest use, which consumes its nonces, and bounds what one organisation stores; 0: no limit, and new nonces are not counted)").
			Checked(config.AtLeast(&c.MaxOutstanding, 0)),
	}
})

// codes are the error codes of the oracle's actors and routes, with their HTTP statuses.
var codes = map[string]int{
	"org_mismatch":  http.StatusForbidden,
	"unknown_nonce": http.StatusNotFound,
	"nonce_used":    http.StatusConflict,
	"nonce_expired": http.StatusGone,
	// Past --oracle-max-outstanding.
	"too_many_outstanding": http.StatusTooManyRequests,
}

// Service is the nonce oracle (the contract's "Nonce oracle").
func Service() services.Service {
	return services.Service{
		Name:     "oracle",
		Settings: Settings,
		Kinds:    func(cfg config.Config, _ services.Env) []actors.Kind { return []actors.Kind{Kind(Settings.Get(cfg))} },
		Routes:   routes,
		Codes:    codes,
	}
}
