// Package servers is a stub replaced by its implementation.
package servers

import (
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
)

// KindName is the actor kind's name.
const KindName = "server-registry"

// Config holds the kind's limits.
type Config struct {
	TTL        time.Duration // --server-ttl
	MaxServers int           // --max-servers
}

// Kind returns the actor kind.
func Kind(cfg Config) actors.Kind {
	return actors.Kind{Name: KindName, New: func(string) actors.Handler { return nil }}
}
