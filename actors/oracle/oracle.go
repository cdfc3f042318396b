// Package oracle is a stub replaced by its implementation.
package oracle

import (
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
)

// KindName is the actor kind's name.
const KindName = "nonce-oracle"

// Config holds the kind's limits.
type Config struct {
	TTL time.Duration // --oracle-nonce-ttl
}

// Kind returns the actor kind.
func Kind(cfg Config) actors.Kind {
	return actors.Kind{Name: KindName, New: func(string) actors.Handler { return nil }}
}
