// Package domains lists the domains the shardkeeper binary serves. It is the one place a
// domain is added (docs/domains.md); the in-process test nodes and the OpenAPI test build from
// the same list, so that what they test is what the binary serves.
package domains

import (
	"github.com/shardkeeper/shardkeeper/actors/chain"
	"github.com/shardkeeper/shardkeeper/actors/device"
	"github.com/shardkeeper/shardkeeper/actors/oracle"
	"github.com/shardkeeper/shardkeeper/actors/relayer"
	"github.com/shardkeeper/shardkeeper/actors/servers"
	"github.com/shardkeeper/shardkeeper/domain"
)

// All returns every domain the binary serves.
func All() []domain.Domain {
	return []domain.Domain{device.Domain(), servers.Domain(), oracle.Domain(), relayer.Domain(), chain.Domain()}
}
