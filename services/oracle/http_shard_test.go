package oracle

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/config"
)

// shardRecorder is a Caller that answers every issue and records the shard it went to;
// with local set it is a LocalCaller leading the shards local accepts.
type shardRecorder struct {
	shards []string
	local  func(shard string) bool
}

func (c *shardRecorder) Call(_ context.Context, kind, id string, _ actors.Request) ([]byte, error) {
	c.shards = append(c.shards, id)
	return []byte(`{"nonce":"x","org_id":"o","issued_at":1,"expires_at":2}`), nil
}

type localRecorder struct{ *shardRecorder }

func (c localRecorder) Local(kind, id string) bool { return c.local(id) }

func issueMany(t *testing.T, c actors.Caller, n int) {
	t.Helper()
	s := &server{caller: c, cfg: config.Default()}
	for range n {
		w := httptest.NewRecorder()
		s.issue(w, httptest.NewRequest(http.MethodPost, "/v1/nonces", strings.NewReader(`{"org_id":"o"}`)))
		if w.Code != http.StatusCreated {
			t.Fatalf("issue: %d %s", w.Code, w.Body)
		}
	}
}

// Issues prefer shards whose partition this node leads, so that they need no forwarding;
// without that knowledge, or when no shard is local, any shard is used.
func TestIssuePrefersLocalShards(t *testing.T) {
	// A node leading a sixteenth of the shards (16 of 256), as one of 16 leaders would.
	led := func(shard string) bool { return shard[0] == '0' }
	rec := &shardRecorder{local: led}
	issueMany(t, localRecorder{rec}, 1000)
	local := 0
	for _, s := range rec.shards {
		if led(s) {
			local++
		}
	}
	// 64 tries at one chance in sixteen all miss 1.6% of the time (16 of 1000, give or take 4).
	if local < 950 {
		t.Errorf("%d of 1000 issues went to a local shard, want nearly all", local)
	}

	none := &shardRecorder{local: func(string) bool { return false }}
	issueMany(t, localRecorder{none}, 200)
	plain := &shardRecorder{}
	issueMany(t, plain, 200)
	for _, rec := range []*shardRecorder{none, plain} {
		seen := map[string]bool{}
		for _, s := range rec.shards {
			seen[s] = true
		}
		if len(seen) < 100 {
			t.Errorf("200 issues used %d distinct shards, want them spread", len(seen))
		}
	}
}
