package all_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/all"
	"github.com/shardkeeper/shardkeeper/services/device"
	"github.com/shardkeeper/shardkeeper/services/oracle"
	"github.com/shardkeeper/shardkeeper/services/servers"
)

// load is config.Load with every service's settings.
func load(args []string, env map[string]string) (config.Config, error) {
	return config.Load(append([]string{"--node-id", "n1"}, args...), func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}, nil, services.Settings(all.Services())...)
}

// The services' options keep the flag names, defaults, environment variables and YAML keys
// they had when they were core options.
func TestServiceSettings(t *testing.T) {
	c, err := load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := device.Settings.Get(c), (device.Config{NonceTTL: 5 * time.Minute, MaxPending: 5, MaxDevices: 100000, DeviceTTL: 2160 * time.Hour}); got != want {
		t.Errorf("device defaults %+v, want %+v", got, want)
	}
	if got, want := servers.Settings.Get(c), (servers.Config{TTL: 5 * time.Minute, MaxServers: 1000}); got != want {
		t.Errorf("servers defaults %+v, want %+v", got, want)
	}
	if got, want := oracle.Settings.Get(c), (oracle.Config{TTL: time.Hour, MaxOutstanding: 100000}); got != want {
		t.Errorf("oracle defaults %+v, want %+v", got, want)
	}

	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("max-devices: 7\nserver-ttl: 1m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = load([]string{"--config", file, "--attest-nonce-ttl", "90s", "--oracle-nonce-ttl=2h", "--max-servers", "3"},
		map[string]string{"SHARDKEEPER_MAX_PENDING_PER_DEVICE": "2", "SHARDKEEPER_DEVICE_TTL": "24h"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := device.Settings.Get(c), (device.Config{NonceTTL: 90 * time.Second, MaxPending: 2, MaxDevices: 7, DeviceTTL: 24 * time.Hour}); got != want {
		t.Errorf("device %+v, want %+v", got, want)
	}
	if got, want := servers.Settings.Get(c), (servers.Config{TTL: time.Minute, MaxServers: 3}); got != want {
		t.Errorf("servers %+v, want %+v", got, want)
	}
	if got := oracle.Settings.Get(c).TTL; got != 2*time.Hour {
		t.Errorf("oracle ttl %s, want 2h", got)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-pending-per-device", "0"}, "invalid --max-pending-per-device: must be at least 1, got 0"},
		{[]string{"--max-devices", "-1"}, "invalid --max-devices: must be at least 1, got -1"},
		{[]string{"--max-servers", "x"}, `invalid value "x" for --max-servers: not an integer`},
		{[]string{"--device-ttl", "0s"}, "invalid --device-ttl: must be positive, got 0s"},
		{[]string{"--server-ttl", "-1m"}, "invalid --server-ttl: must be positive, got -1m0s"},
		{[]string{"--oracle-nonce-ttl", "0s"}, "invalid --oracle-nonce-ttl: must be positive, got 0s"},
		{[]string{"--oracle-max-outstanding", "-1"}, "invalid --oracle-max-outstanding: must be at least 0, got -1"},
		{[]string{"--attest-nonce-ttl", "5"}, `invalid value "5" for --attest-nonce-ttl: time: missing unit in duration "5"`},
	} {
		if _, err := load(tc.args, nil); err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// serve --help lists every service's flags.
func TestHelpListsServiceFlags(t *testing.T) {
	var out bytes.Buffer
	_, err := config.Load([]string{"--help"}, nil, &out, services.Settings(all.Services())...)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, f := range []string{"attest-nonce-ttl", "max-pending-per-device", "max-devices", "device-ttl",
		"server-ttl", "max-servers", "oracle-nonce-ttl", "oracle-max-outstanding", "chain-max-queued"} {
		if !strings.Contains(out.String(), "--"+f+" ") {
			t.Errorf("--help does not list --%s", f)
		}
	}
}

// The services fit together: distinct names and kinds, one status per error code, routes that
// do not conflict.
func TestServicesFitTogether(t *testing.T) {
	cfg, err := load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	names, kinds := map[string]bool{}, map[string]bool{}
	for _, d := range all.Services() {
		if d.Name == "" || names[d.Name] {
			t.Errorf("service name %q is empty or taken", d.Name)
		}
		names[d.Name] = true
		if d.Kinds == nil || len(d.Kinds(cfg, services.Env{Registerer: prometheus.NewRegistry()})) == 0 {
			t.Errorf("service %s has no kinds", d.Name)
		}
	}
	for _, k := range services.Kinds(all.Services(), cfg, services.Env{}) {
		if kinds[k.Name] {
			t.Errorf("kind %s twice", k.Name)
		}
		kinds[k.Name] = true
	}
	if _, err := node.NewMux(nil, prometheus.NewRegistry(), all.Services(), nil, cfg); err != nil {
		t.Fatal(err)
	}
}

// config.example.yaml in the repository root loads, and every value in it is the default:
// it documents the defaults, so it must never drift from them.
func TestExampleConfigIsTheDefaults(t *testing.T) {
	fromFile, err := load([]string{"--config", filepath.Join("..", "..", "config.example.yaml")}, nil)
	if err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
	defaults, err := load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fromFile.ConfigFile = ""
	if !reflect.DeepEqual(fromFile, defaults) {
		t.Fatalf("config.example.yaml differs from the defaults:\n file     %+v\n defaults %+v", fromFile, defaults)
	}
}
