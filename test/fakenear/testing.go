package fakenear

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// Start starts a fake for a test: cfg (logs discarded unless cfg.Logger is set), one endpoint
// per EndpointConfig on 127.0.0.1 with a free port (one default endpoint when none is given).
// The fake is closed when the test ends.
func Start(t testing.TB, cfg Config, endpoints ...EndpointConfig) *Fake {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatalf("fakenear.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("fakenear: close: %v", err)
		}
	})
	if len(endpoints) == 0 {
		endpoints = []EndpointConfig{{}}
	}
	for _, ec := range endpoints {
		if _, err := f.Listen("127.0.0.1:0", ec); err != nil {
			t.Fatalf("fakenear.Start: %v", err)
		}
	}
	return f
}

// Client returns a near.Client of the given endpoints (every endpoint of f when none is given),
// in order, with a cool-down short enough for tests.
func (f *Fake) Client(t testing.TB, eps ...*Endpoint) *near.Client {
	t.Helper()
	if len(eps) == 0 {
		eps = f.Endpoints()
	}
	urls := make([]string, len(eps))
	for i, e := range eps {
		urls[i] = e.URL()
	}
	c, err := near.NewClient(urls, near.WithCooldown(10*time.Millisecond))
	if err != nil {
		t.Fatalf("fakenear: client: %v", err)
	}
	return c
}
