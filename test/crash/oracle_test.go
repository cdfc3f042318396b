package crash

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/proc"
)

// oracleNonce is the client-side history of one nonce whose issue was acknowledged (201).
type oracleNonce struct {
	nonce, org string
	// rid is the request_id of the consume sent during the load ("" if none was sent).
	rid string
	// consumed is true when that consume was acknowledged (200), with usedAt.
	consumed bool
	usedAt   int64
}

// oracleHistory collects what the load's clients were told.
type oracleHistory struct {
	mu       sync.Mutex
	nonces   []*oracleNonce
	wrong    []string       // answers the contract forbids
	outcomes map[string]int // class of every request, for the log
}

func (h *oracleHistory) outcome(op string, status int, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.outcomes[fmt.Sprintf("%s %d", op, status)]++
	case isDialError(err):
		h.outcomes[op+" refused"]++
	default:
		h.outcomes[op+" transport error"]++
	}
}

func (h *oracleHistory) fail(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wrong = append(h.wrong, fmt.Sprintf(format, args...))
}

// oracleCall sends one JSON request to the node and returns the status, the "error" code of
// an error body, and the body. err is a transport error (no status).
func oracleCall(hc *http.Client, n *proc.Node, method, path string, body any) (int, string, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, "", nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, n.URL(path), rd)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", nil, err
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		return resp.StatusCode, e.Error, b, fmt.Errorf("503 without Retry-After: %s", b)
	}
	return resp.StatusCode, e.Error, b, nil
}

// oracleLoad runs clients goroutines that each issue a nonce and consume it (three times in
// four; the fourth nonce is left unused) until stop is closed. acked is closed once target
// consumes have been acknowledged.
func oracleLoad(n *proc.Node, h *oracleHistory, clients, target int, stop <-chan struct{}) (acked <-chan struct{}, wait func()) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: tr}
	reached := make(chan struct{})
	var count atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			org := fmt.Sprintf("org-%d", c%4)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				status, code, body, err := oracleCall(hc, n, "POST", "/v1/nonces", map[string]string{"org_id": org})
				h.outcome("issue", status, err)
				if err != nil || status != http.StatusCreated {
					if err == nil && status != http.StatusServiceUnavailable {
						h.fail("issue: %d %s %s", status, code, body)
					}
					continue
				}
				var issued struct {
					Nonce string `json:"nonce"`
					OrgID string `json:"org_id"`
				}
				if err := json.Unmarshal(body, &issued); err != nil || issued.OrgID != org {
					h.fail("issue: unexpected reply %s", body)
					continue
				}
				rec := &oracleNonce{nonce: issued.Nonce, org: org}
				h.mu.Lock()
				h.nonces = append(h.nonces, rec)
				h.mu.Unlock()
				if i%4 == 3 {
					continue
				}
				rid := fmt.Sprintf("load-%d-%d", c, i)
				h.mu.Lock()
				rec.rid = rid
				h.mu.Unlock()
				status, code, body, err = oracleCall(hc, n, "POST", "/v1/nonces/"+issued.Nonce+"/consume",
					map[string]string{"org_id": org, "request_id": rid})
				h.outcome("consume", status, err)
				if err != nil || status != http.StatusOK {
					if err == nil && status != http.StatusServiceUnavailable {
						h.fail("first consume of %s: %d %s %s", issued.Nonce, status, code, body)
					}
					continue
				}
				var used struct {
					Nonce  string `json:"nonce"`
					UsedAt int64  `json:"used_at"`
				}
				if err := json.Unmarshal(body, &used); err != nil || used.Nonce != issued.Nonce || used.UsedAt == 0 {
					h.fail("consume of %s: unexpected reply %s", issued.Nonce, body)
					continue
				}
				h.mu.Lock()
				rec.consumed, rec.usedAt = true, used.UsedAt
				h.mu.Unlock()
				if count.Add(1) == int64(target) {
					close(reached)
				}
			}
		})
	}
	return reached, func() { wg.Wait(); tr.CloseIdleConnections() }
}

// oracleMust sends a request until it is answered with something other than 503 or a
// transport error, for up to 10 s. Only for requests that are safe to repeat.
func oracleMust(hc *http.Client, n *proc.Node, method, path string, body any) (int, string, []byte, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, code, b, err := oracleCall(hc, n, method, path, body)
		if err == nil && status != http.StatusServiceUnavailable {
			return status, code, b, nil
		}
		if time.Now().After(deadline) {
			return status, code, b, fmt.Errorf("still unanswered after 10s: %d %s %v", status, b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// oracleVerify checks one nonce of the history against the restarted node and returns what
// is wrong ("" if nothing) and the class of the nonce, for the log.
func oracleVerify(hc *http.Client, n *proc.Node, rec *oracleNonce) (string, string) {
	type info struct {
		Nonce  string `json:"nonce"`
		OrgID  string `json:"org_id"`
		UsedAt *int64 `json:"used_at"`
	}
	get := func() (info, string) {
		var got info
		status, code, b, err := oracleMust(hc, n, "GET", "/v1/nonces/"+rec.nonce, nil)
		if err != nil || status != http.StatusOK {
			return got, fmt.Sprintf("GET %s (issue acknowledged): %d %s %s %v", rec.nonce, status, code, b, err)
		}
		if err := json.Unmarshal(b, &got); err != nil || got.Nonce != rec.nonce || got.OrgID != rec.org {
			return got, fmt.Sprintf("GET %s: %s, want org_id %s", rec.nonce, b, rec.org)
		}
		return got, ""
	}
	consume := func(rid string) (int, string, int64, string) {
		status, code, b, err := oracleMust(hc, n, "POST", "/v1/nonces/"+rec.nonce+"/consume",
			map[string]string{"org_id": rec.org, "request_id": rid})
		if err != nil {
			return 0, "", 0, fmt.Sprintf("consume %s: %v", rec.nonce, err)
		}
		var used struct {
			UsedAt int64 `json:"used_at"`
		}
		_ = json.Unmarshal(b, &used)
		return status, code, used.UsedAt, ""
	}

	got, bad := get()
	if bad != "" {
		return bad, "issued"
	}
	switch {
	case rec.consumed:
		if got.UsedAt == nil || *got.UsedAt != rec.usedAt {
			return fmt.Sprintf("GET %s: used_at %v, acknowledged consume said %d", rec.nonce, fmtPtr(got.UsedAt), rec.usedAt), "consumed"
		}
		status, code, _, bad := consume(rec.rid + "-other")
		if bad != "" || status != http.StatusConflict || code != "nonce_used" {
			return fmt.Sprintf("consume %s again with another request_id: %d %s %s, want 409 nonce_used", rec.nonce, status, code, bad), "consumed"
		}
		status, code, usedAt, bad := consume(rec.rid)
		if bad != "" || status != http.StatusOK || usedAt != rec.usedAt {
			return fmt.Sprintf("consume %s again with its request_id: %d %s used_at %d %s, want 200 used_at %d", rec.nonce, status, code, usedAt, bad, rec.usedAt), "consumed"
		}
		return "", "consumed"
	case rec.rid != "":
		// The consume's outcome is unknown; repeating it with its request_id settles it.
		status, code, usedAt, bad := consume(rec.rid)
		if bad != "" || status != http.StatusOK || (got.UsedAt != nil && *got.UsedAt != usedAt) {
			return fmt.Sprintf("consume %s (outcome unknown, used_at %v) again with its request_id: %d %s used_at %d %s, want 200",
				rec.nonce, fmtPtr(got.UsedAt), status, code, usedAt, bad), "consume unknown"
		}
		class := "consume unknown, had applied"
		if got.UsedAt == nil {
			class = "consume unknown, had not applied"
		}
		if after, bad := get(); bad != "" || after.UsedAt == nil || *after.UsedAt != usedAt {
			return fmt.Sprintf("GET %s after settling its consume: used_at %v, want %d %s", rec.nonce, fmtPtr(after.UsedAt), usedAt, bad), class
		}
		return "", class
	default:
		if got.UsedAt != nil {
			return fmt.Sprintf("GET %s: used_at %d, but no consume was ever sent", rec.nonce, *got.UsedAt), "unused"
		}
		status, code, _, bad := consume("after-restart")
		if bad != "" || status != http.StatusOK {
			return fmt.Sprintf("first consume of unused %s after the restart: %d %s %s, want 200", rec.nonce, status, code, bad), "unused"
		}
		status, code, _, bad = consume("after-restart-other")
		if bad != "" || status != http.StatusConflict || code != "nonce_used" {
			return fmt.Sprintf("second consume of %s after the restart: %d %s %s, want 409 nonce_used", rec.nonce, status, code, bad), "unused"
		}
		return "", "unused"
	}
}

func fmtPtr(p *int64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// TestOracleNoncesSurviveKill runs the real binary under a load of issues and consumes from 32
// clients, SIGKILLs it, restarts it on the same data directory, and checks every nonce the
// clients were told about: an acknowledged issue is still there; an acknowledged consume is
// still used, at the acknowledged used_at, is refused to another request_id (409) and
// answered again to its own (200, same used_at); a consume whose outcome is unknown is
// settled by repeating it; a nonce never consumed is still accepted exactly once.
func TestOracleNoncesSurviveKill(t *testing.T) {
	const clients, target = 32, 2000
	n := proc.StartReady(t, proc.Config{Bin: proc.Build(t, "./cmd/shardkeeper"), Command: []string{"serve"}, Flags: fastFlags})
	h := &oracleHistory{outcomes: map[string]int{}}
	stop := make(chan struct{})
	start := time.Now()
	acked, wait := oracleLoad(n, h, clients, target, stop)
	select {
	case <-acked:
	case <-time.After(60 * time.Second):
		close(stop)
		wait()
		t.Fatalf("fewer than %d consumes acknowledged in 60s; outcomes %v", target, h.outcomes)
	}
	t.Logf("%d consumes acknowledged in %s; SIGKILL under load", target, time.Since(start).Round(time.Millisecond))
	n.Kill()
	close(stop)
	wait()
	t.Logf("load outcomes: %v", h.outcomes)
	for _, w := range h.wrong {
		t.Errorf("during the load: %s", w)
	}
	n.RestartReady()

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	work := make(chan *oracleNonce)
	var mu sync.Mutex
	var problems []string
	classes := map[string]int{}
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for rec := range work {
				bad, class := oracleVerify(hc, n, rec)
				mu.Lock()
				classes[class]++
				if bad != "" {
					problems = append(problems, bad)
				}
				mu.Unlock()
			}
		})
	}
	for _, rec := range h.nonces {
		work <- rec
	}
	close(work)
	wg.Wait()
	t.Logf("checked %d acknowledged issues after the restart: %v", len(h.nonces), classes)
	if classes["consumed"] < target {
		t.Errorf("%d acknowledged consumes checked, want ≥ %d", classes["consumed"], target)
	}
	sort.Strings(problems)
	for i, p := range problems {
		if i == 20 {
			t.Errorf("... and %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}
}
