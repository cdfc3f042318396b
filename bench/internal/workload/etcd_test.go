package workload

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeEtcd is a minimal v3 JSON gateway: lease grant, and txn with CREATE/VALUE EQUAL
// compares and puts, over an in-memory map shared by every "member".
type fakeEtcd struct {
	mu       sync.Mutex
	kv       map[string]string // decoded key → decoded value
	leases   map[string]string // decoded key → lease
	hits     map[string]int    // member → requests
	failNext bool              // answer the next txn 503
	wrongOrg bool              // every VALUE compare fails (the nonce is of another org)
}

func (f *fakeEtcd) member(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.hits[name]++
		dec := func(s string) string { b, _ := base64.StdEncoding.DecodeString(s); return string(b) }
		switch r.URL.Path {
		case "/v3/lease/grant":
			_, _ = w.Write([]byte(`{"header":{},"ID":"7587","TTL":"3600"}`))
		case "/v3/kv/txn":
			if f.failNext {
				f.failNext = false
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":"etcdserver: leader changed","code":14}`))
				return
			}
			var t struct {
				Compare []struct {
					Target, Key, Value string
					CreateRevision     string `json:"createRevision"`
				}
				Success []struct {
					RequestPut struct{ Key, Value, Lease string } `json:"requestPut"`
				}
			}
			if err := json.NewDecoder(r.Body).Decode(&t); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ok := true
			for _, c := range t.Compare {
				v, exists := f.kv[dec(c.Key)]
				switch c.Target {
				case "CREATE":
					ok = ok && c.CreateRevision == "0" && !exists
				case "VALUE":
					ok = ok && exists && v == dec(c.Value) && !f.wrongOrg
				default:
					http.Error(w, "bad target "+c.Target, http.StatusBadRequest)
					return
				}
			}
			if !ok {
				_, _ = w.Write([]byte(`{"header":{}}`)) // "succeeded" absent: false
				return
			}
			for _, op := range t.Success {
				f.kv[dec(op.RequestPut.Key)] = dec(op.RequestPut.Value)
				f.leases[dec(op.RequestPut.Key)] = op.RequestPut.Lease
			}
			_, _ = w.Write([]byte(`{"header":{},"succeeded":true,"responses":[]}`))
		default:
			http.NotFound(w, r)
		}
	})
}

func TestEtcdOracleOps(t *testing.T) {
	f := &fakeEtcd{kv: map[string]string{}, leases: map[string]string{}, hits: map[string]int{}}
	a, b := httptest.NewServer(f.member("a")), httptest.NewServer(f.member("b"))
	defer a.Close()
	defer b.Close()
	e := &Etcd{URLs: []string{a.URL, b.URL}, Prefix: "/v3", HC: http.DefaultClient}
	ctx := context.Background()
	lease, err := e.GrantLease(ctx, 3600)
	if err != nil || lease != "7587" {
		t.Fatalf("GrantLease = %q, %v", lease, err)
	}
	f.hits = map[string]int{}
	ops := EtcdOracleOps(e, lease, 2)
	for range 5 {
		for _, op := range ops {
			if err := op(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	nonces, used := 0, 0
	for k, v := range f.kv {
		switch {
		case strings.HasPrefix(k, "nonce/"):
			nonces++
			if !strings.HasPrefix(v, "bench-org-") {
				t.Errorf("%s = %q", k, v)
			}
			if _, ok := f.kv["used/"+strings.TrimPrefix(k, "nonce/")]; !ok {
				t.Errorf("%s not consumed", k)
			}
		case strings.HasPrefix(k, "used/"):
			used++
		}
		if f.leases[k] != "7587" {
			t.Errorf("%s without the lease", k)
		}
	}
	if nonces != 10 || used != 10 || f.hits["a"] != f.hits["b"] {
		t.Fatalf("%d nonces, %d used, hits %v", nonces, used, f.hits)
	}

	// A consume that does not succeed (the nonce is of another org) is an error, and so is
	// an error answer of the gateway.
	f.mu.Lock()
	f.wrongOrg = true
	f.mu.Unlock()
	err = ops[0](ctx)
	if got := Classify(err); got != "etcd consume txn not succeeded" {
		t.Fatalf("Classify(%v) = %q", err, got)
	}
	f.mu.Lock()
	f.wrongOrg, f.failNext = false, true
	f.mu.Unlock()
	err = ops[0](ctx)
	if got := Classify(err); got != "etcd 503 etcdserver: leader changed" {
		t.Fatalf("Classify(%v) = %q", err, got)
	}
}
