package api

import "net/http"

// Route is one HTTP route: a pattern as http.ServeMux takes it ("METHOD /path/{param}") and its
// handler. Routes are values, so that what a node serves can be listed (the OpenAPI test does).
type Route struct {
	Pattern string
	Handler http.HandlerFunc
	// Admin marks an operator's route (behind the admin token): with --admin-addr it is served
	// there only.
	Admin bool
}
