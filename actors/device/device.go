// Package device is a stub replaced by its implementation.
package device

import (
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
)

// KindName is the actor kind's name.
const KindName = "device-registry"

// Config holds the kind's limits.
type Config struct {
	NonceTTL   time.Duration // --attest-nonce-ttl
	MaxPending int           // --max-pending-per-device
	MaxDevices int           // --max-devices
	DeviceTTL  time.Duration // --device-ttl
}

// Kind returns the actor kind.
func Kind(cfg Config) actors.Kind {
	return actors.Kind{Name: KindName, New: func(string) actors.Handler { return nil }}
}
