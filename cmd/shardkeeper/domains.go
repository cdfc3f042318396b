package main

import (
	"github.com/shardkeeper/shardkeeper/domain"
	"github.com/shardkeeper/shardkeeper/domains"
)

// served lists the domains `shardkeeper serve` serves: every domain of package domains. The
// list lives there rather than here so that the in-process test nodes (node/nodetest) and the
// OpenAPI test build from exactly what the binary serves; adding a domain is one line there.
func served() []domain.Domain { return domains.All() }
