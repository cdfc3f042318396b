package device

import (
	"net/http"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/names"
)

// Settings are the service's options: flags, SHARDKEEPER_* variables and YAML keys of the same
// names as every other setting.
var Settings = config.NewSection("device attestation registry", func(c *Config) []config.Option {
	return []config.Option{
		config.Duration(&c.NonceTTL, "attest-nonce-ttl", "5m", "lifetime of a device challenge nonce").
			Checked(config.Positive(&c.NonceTTL)),
		config.Int(&c.MaxPending, "max-pending-per-device", "5", "unexpired challenges one device may hold (>= 1)").
			Checked(config.AtLeast(&c.MaxPending, 1)),
		config.Int(&c.MaxDevices, "max-devices", "100000", "devices per attestation registry (>= 1)").
			Checked(config.AtLeast(&c.MaxDevices, 1)),
		config.Duration(&c.DeviceTTL, "device-ttl", "2160h", "devices not seen for this long are removed").
			Checked(config.Positive(&c.DeviceTTL)),
	}
})

// NamesKindName is the kind of the actor holding the device registries' names (package names).
const NamesKindName = "device-registries"

// codes are the error codes of the registry's actors and routes, with their HTTP statuses.
var codes = map[string]int{
	"invalid_signature": http.StatusUnauthorized,
	"unknown_device":    http.StatusNotFound,
	"unknown_nonce":     http.StatusNotFound,
	"nonce_used":        http.StatusConflict,
	"device_exists":     http.StatusConflict,
	"nonce_expired":     http.StatusGone,
	"too_many_pending":  http.StatusTooManyRequests,
	"registry_full":     http.StatusServiceUnavailable,
}

// Service is the device attestation registry (the contract's "Device attestation registry").
func Service() services.Service {
	return services.Service{
		Name:     "device",
		Settings: Settings,
		Kinds: func(cfg config.Config, _ services.Env) []actors.Kind {
			return []actors.Kind{Kind(Settings.Get(cfg)), names.Kind(NamesKindName)}
		},
		Routes: routes,
		Codes:  codes,
	}
}
