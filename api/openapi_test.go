package api_test

import (
	"os"
	"sort"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The OpenAPI document must describe every path of the contract (../shared/API.md), and
// nothing that is not served.
func TestOpenAPIDescribesTheContract(t *testing.T) {
	b, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	want := map[string][]string{
		"/v1/attest/{registry}/register":            {"post"},
		"/v1/attest/{registry}/challenge":           {"post"},
		"/v1/attest/{registry}/verify":              {"post"},
		"/v1/attest/{registry}/devices/{device_id}": {"get", "delete"},
		"/attest/register":                          {"post"},
		"/attest/challenge":                         {"post"},
		"/attest/verify":                            {"post"},
		"/v1/servers/{registry}/{server_id}":        {"put", "delete"},
		"/v1/servers/{registry}":                    {"get"},
		"/servers":                                  {"get", "post"},
		"/v1/nonces":                                {"post"},
		"/v1/nonces/{nonce}/consume":                {"post"},
		"/v1/nonces/{nonce}":                        {"get"},
		"/healthz":                                  {"get"},
		"/readyz":                                   {"get"},
		"/metrics":                                  {"get"},
		"/v1/cluster":                               {"get"},
		"/v1/cluster/hashes":                        {"get"},
	}
	for path, methods := range want {
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("openapi.yaml lacks %s", path)
			continue
		}
		var got []string
		for m := range ops {
			if m != "parameters" {
				got = append(got, m)
			}
		}
		sort.Strings(got)
		sort.Strings(methods)
		if len(got) != len(methods) {
			t.Errorf("%s: methods %v, want %v", path, got, methods)
		}
	}
	for path := range doc.Paths {
		if _, ok := want[path]; !ok {
			t.Errorf("openapi.yaml describes %s, which the contract does not have", path)
		}
	}
}
