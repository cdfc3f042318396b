package buildinfo

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, tc := range []struct {
		name             string
		ldVersion, ldRev string
		bi               *debug.BuildInfo
		want             Info
	}{
		{"link-time values win", "v1.2.3-4-gabc", "abcdef0123", vcs("fedcba", "true"),
			Info{"v1.2.3-4-gabc", "abcdef0123", "go1.99.1"}},
		{"vcs settings without link-time values", "", "", vcs("fedcba", "false"),
			Info{"dev", "fedcba", "go1.99.1"}},
		{"modified tree", "", "", vcs("fedcba", "true"),
			Info{"dev-dirty", "fedcba", "go1.99.1"}},
		{"go install module@version", "", "",
			&debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v0.4.0"}},
			Info{"v0.4.0", "unknown", "go1.99.1"}},
		{"no build information", "", "", nil,
			Info{"dev", "unknown", runtime.Version()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve(tc.ldVersion, tc.ldRev, tc.bi); got != tc.want {
				t.Errorf("resolve = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	got := Info{Version: "v1.0.0", Commit: "0123abc", GoVersion: "go1.26.8"}.String()
	if want := "shardkeeper v1.0.0 (commit 0123abc, go1.26.8)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(Info{Version: "v1.0.0", Commit: "0123abc", GoVersion: "go1.26.8"}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "shardkeeper_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v", mfs)
	}
	m := mfs[0].GetMetric()[0]
	if m.GetGauge().GetValue() != 1 {
		t.Errorf("value %v, want 1", m.GetGauge().GetValue())
	}
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	want := map[string]string{"version": "v1.0.0", "commit": "0123abc", "goversion": "go1.26.8"}
	if len(labels) != len(want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, labels[k], v)
		}
	}
	// A second collector registers in another registry: each node has its own.
	if err := prometheus.NewRegistry().Register(Collector()); err != nil {
		t.Errorf("Collector: %v", err)
	}
}

// The Makefile sets the version and commit with -X on these symbol names; renaming them
// would silently leave every release "dev".
func TestLinkTimeValues(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "printinfo")
	const pkg = "github.com/shardkeeper/shardkeeper/buildinfo"
	build := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X "+pkg+".version=v7.7.7-test -X "+pkg+".commit=feedface",
		"./testdata/printinfo")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "shardkeeper v7.7.7-test (commit feedface, " + runtime.Version() + ")"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}
