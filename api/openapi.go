package api

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPI is the OpenAPI document of the contract.
//
//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns the OpenAPI document of the contract, as GET /openapi.yaml serves it.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// OpenAPIRoute serves the OpenAPI document at GET /openapi.yaml.
func OpenAPIRoute() Route {
	return Route{Pattern: "GET /openapi.yaml", Handler: func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/yaml")
		h.Set("Content-Length", strconv.Itoa(len(openAPI)))
		_, _ = w.Write(openAPI)
	}}
}
