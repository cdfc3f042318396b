// Package all lists the services the shardkeeper binary serves. It is the one place a service
// is added (docs/services.md); the in-process test nodes and the OpenAPI test build from the
// same list, so that what they test is what the binary serves.
package all

import (
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"github.com/shardkeeper/shardkeeper/services/device"
	"github.com/shardkeeper/shardkeeper/services/oracle"
	"github.com/shardkeeper/shardkeeper/services/relayer"
	"github.com/shardkeeper/shardkeeper/services/servers"
)

// Services returns every service the binary serves.
func Services() []services.Service {
	return []services.Service{device.Service(), servers.Service(), oracle.Service(), relayer.Service(), chain.Service()}
}
