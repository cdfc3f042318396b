// Package buildinfo says which build of shardkeeper is running: its version, commit and Go
// version, as printed by `shardkeeper --version` and exported as shardkeeper_build_info.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Set at link time by the Makefile:
//
//	-X github.com/shardkeeper/shardkeeper/buildinfo.version=$(git describe --tags --always --dirty)
//	-X github.com/shardkeeper/shardkeeper/buildinfo.commit=$(git rev-parse HEAD)
//
// They are variables, not constants, because -X can only set string variables.
var (
	version string
	commit  string
)

// Info identifies one build.
type Info struct {
	Version   string // git describe output, the module version, or "dev"
	Commit    string // full commit hash, or "unknown"
	GoVersion string // the toolchain that built the binary, e.g. "go1.26.8"
}

var (
	once   sync.Once
	cached Info
)

// Get returns this binary's build information: the link-time values when the Makefile set
// them, otherwise what the Go toolchain stamped into the binary (module version, vcs
// settings), otherwise "dev" and "unknown".
func Get() Info {
	once.Do(func() {
		bi, _ := debug.ReadBuildInfo()
		cached = resolve(version, commit, bi)
	})
	return cached
}

// resolve is Get's logic over explicit inputs, so that each fallback can be tested.
func resolve(ldVersion, ldCommit string, bi *debug.BuildInfo) Info {
	info := Info{Version: ldVersion, Commit: ldCommit, GoVersion: runtime.Version()}
	if bi != nil && bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	var revision string
	var modified bool
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if info.Commit == "" {
		info.Commit = revision
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	if info.Version == "" && bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		// Installed with `go install module@version`: the module version is the release.
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "dev"
		if modified {
			// Same marker as git describe --dirty: the tree had uncommitted changes.
			info.Version += "-dirty"
		}
	}
	return info
}

// String is the one-line form `shardkeeper --version` prints:
// "shardkeeper <version> (commit <commit>, <go version>)".
func (i Info) String() string {
	return "shardkeeper " + i.Version + " (commit " + i.Commit + ", " + i.GoVersion + ")"
}

// Collector returns a collector of the gauge shardkeeper_build_info{version,commit,goversion},
// always 1: the labels carry the information, so dashboards can join on them.
func Collector() prometheus.Collector {
	return newCollector(Get())
}

func newCollector(i Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "shardkeeper_build_info",
		Help:        "Build information of the running shardkeeper binary; always 1.",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
