package api_test

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
	"github.com/shardkeeper/shardkeeper/ops"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/all"
	"go.yaml.in/yaml/v3"
)

// openAPIDoc is the part of openapi.yaml the tests read.
type openAPIDoc struct {
	OpenAPI    string                              `yaml:"openapi"`
	Paths      map[string]map[string]yaml.Node     `yaml:"paths"`
	Components struct{ Schemas map[string]schema } `yaml:"components"`
}

type schema struct {
	Properties map[string]schema `yaml:"properties"`
	Items      *schema           `yaml:"items"`
	Enum       []string          `yaml:"enum"`
	Ref        string            `yaml:"$ref"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := yaml.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	return doc
}

// operations are the (method, path) pairs of doc, as mux patterns: "GET /v1/nonces/{nonce}".
func operations(doc openAPIDoc) map[string]bool {
	ops := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				ops[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	return ops
}

// opsPatterns lists the patterns ops.Register registers.
type opsPatterns []string

func (p *opsPatterns) Handle(pattern string, _ http.Handler) { *p = append(*p, pattern) }
func (p *opsPatterns) HandleFunc(pattern string, _ func(http.ResponseWriter, *http.Request)) {
	*p = append(*p, pattern)
}

var wildcard = regexp.MustCompile(`\{[^}]*\}`)

// resolve is the pattern of mux that serves a request to pattern (wildcards filled in).
func resolve(mux *http.ServeMux, pattern string) string {
	method, path, _ := strings.Cut(pattern, " ")
	req := httptest.NewRequest(method, wildcard.ReplaceAllString(path, "x"), nil)
	_, got := mux.Handler(req)
	return got
}

// The routes of the node — ops.Register's, GET /openapi.yaml and every service's the binary
// serves, each checked to be live on the mux the node builds — are exactly the operations of
// openapi.yaml.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	cfg := config.Default()
	mux, err := node.NewMux(nil, prometheus.NewRegistry(), all.Services(), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{api.OpenAPIRoute().Pattern: true}
	var registered opsPatterns
	ops.Register(&registered, nil, nil, "", nil)
	for _, p := range registered {
		served[p] = true
	}
	for _, r := range services.Routes(all.Services(), services.Env{}, cfg) {
		served[r.Pattern] = true
	}
	for p := range served {
		if got := resolve(mux.ServeMux, p); got != p {
			t.Errorf("%s: the node's mux serves it with %q", p, got)
		}
	}
	documented := operations(loadOpenAPI(t))
	for _, p := range slices.Sorted(maps.Keys(served)) {
		if !documented[p] {
			t.Errorf("%s is served but openapi.yaml does not describe it", p)
		}
	}
	for p := range documented {
		if !served[p] {
			t.Errorf("openapi.yaml describes %s, which the node does not serve", p)
		}
	}
}

// Every error code an answer can carry — the core ones and every service's — is in the enum of
// the Error schema, and the enum has no other.
func TestOpenAPIListsEveryErrorCode(t *testing.T) {
	codes := api.CoreCodes().Map()
	for _, d := range all.Services() {
		maps.Copy(codes, d.Codes)
	}
	want := slices.Sorted(maps.Keys(codes))
	got := slices.Sorted(slices.Values(loadOpenAPI(t).Components.Schemas["Error"].Properties["error"].Enum))
	if !slices.Equal(got, want) {
		t.Fatalf("Error.error enum %v\nwant the codes answered %v", got, want)
	}
}

// jsonFields are the JSON names of the fields of struct type typ.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func propertyNames(s schema) []string {
	var out []string
	for name := range s.Properties {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// The Cluster schema has exactly the fields GET /v1/cluster answers.
func TestOpenAPIClusterBody(t *testing.T) {
	schemas := loadOpenAPI(t).Components.Schemas
	clusterDoc := schemas["Cluster"]
	resolveRef := func(s schema) schema {
		if s.Ref != "" {
			return schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
		}
		return s
	}
	for _, c := range []struct {
		name string
		doc  schema
		typ  reflect.Type
	}{
		{"cluster", clusterDoc, reflect.TypeFor[ops.ClusterStatus]()},
		{"member", resolveRef(*clusterDoc.Properties["members"].Items), reflect.TypeFor[ops.Member]()},
		{"partition", resolveRef(*clusterDoc.Properties["partitions"].Items), reflect.TypeFor[cluster.PartitionStatus]()},
	} {
		if got, want := propertyNames(c.doc), jsonFields(c.typ); !slices.Equal(got, want) {
			t.Errorf("%s: openapi.yaml documents %v; the body has %v", c.name, got, want)
		}
	}
}

// GET /openapi.yaml serves the document.
func TestOpenAPIServed(t *testing.T) {
	rec := httptest.NewRecorder()
	api.OpenAPIRoute().Handler(rec, httptest.NewRequest(http.MethodGet, "/openapi.yaml", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/yaml" ||
		rec.Body.String() != string(api.OpenAPI()) || !strings.HasPrefix(rec.Body.String(), "openapi: 3") {
		t.Fatalf("GET /openapi.yaml: %d %q, %d bytes", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
	}
}
