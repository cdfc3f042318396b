package main

import (
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/all"
)

// served lists the services `shardkeeper serve` serves: every service of package
// services/all. The list lives there rather than here so that the in-process test nodes
// (node/nodetest) and the OpenAPI test build from exactly what the binary serves; adding a
// service is one line there.
func served() []services.Service { return all.Services() }
