package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op builds an operation for hand-written histories; ret < 0 marks an unknown outcome
// (Output.Unknown is forced and the return time left open).
func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	if ret < 0 {
		out.Unknown = true
		ret = call
	}
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func issue(key string) Input              { return Input{Op: OpIssue, Key: key} }
func consume(key, req string) Input       { return Input{Op: OpConsume, Key: key, RequestID: req} }
func get(key string) Input                { return Input{Op: OpGet, Key: key} }
func challenge(key string) Input          { return Input{Op: OpChallenge, Key: key} }
func verify(key string, valid bool) Input { return Input{Op: OpVerify, Key: key, ValidSig: valid} }
func verifyReq(key string, valid bool, req string) Input {
	return Input{Op: OpVerify, Key: key, ValidSig: valid, RequestID: req}
}
func put(key string) Input  { return Input{Op: OpPut, Key: key} }
func list(key string) Input { return Input{Op: OpList, Key: key} }

var (
	created  = Output{Status: 201}
	used     = Output{Status: 409, Code: "nonce_used"}
	unknown  = Output{}
	notFound = Output{Status: 404, Code: "unknown_nonce"}
)

func ok(usedAt int64) Output                                { return Output{Status: 200, UsedAt: usedAt} }
func seen(at int64) Output                                  { return Output{Status: 200, LastSeen: at} }
func listed(at int64) Output                                { return Output{Status: 200, Present: true, LastSeen: at} }
func unused() Output                                        { return Output{Status: 200} }
func absent() Output                                        { return Output{Status: 200} }
func badSig() Output                                        { return Output{Status: 401, Code: "invalid_signature"} }
func verified() Output                                      { return Output{Status: 200} }
func unavailable503() Output                                { return Output{Status: 503, Code: "unavailable", Unknown: true} }
func hist(ops ...porcupine.Operation) []porcupine.Operation { return ops }

type modelCase struct {
	name    string
	model   porcupine.Model
	history []porcupine.Operation
	legal   bool
}

func TestModels(t *testing.T) {
	cases := []modelCase{
		// The nonce oracle.
		{"nonce: consume once, idempotent retry, replay refused, get", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, 20, consume("a", "r1"), ok(15)),
			op(0, 21, 30, consume("a", "r1"), ok(15)),
			op(1, 21, 30, consume("a", "r2"), used),
			op(0, 31, 40, get("a"), ok(15)),
		), true},
		{"nonce: consumed twice with different request ids", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, 20, consume("a", "r1"), ok(15)),
			op(1, 21, 30, consume("a", "r2"), ok(25)),
		), false},
		{"nonce: two racing consumers, one wins", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, 30, consume("a", "r1"), used),
			op(1, 12, 29, consume("a", "r2"), ok(20)),
		), true},
		{"nonce: two racing consumers, both win", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, 30, consume("a", "r1"), ok(21)),
			op(1, 12, 29, consume("a", "r2"), ok(20)),
		), false},
		{"nonce: an unknown consume took effect (409 for others, 200 for its retry)", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, -1, consume("a", "r1"), unknown),
			op(1, 20, 30, consume("a", "r2"), used),
			op(2, 31, 40, consume("a", "r1"), ok(12)),
		), true},
		{"nonce: an unknown consume did not take effect", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, -1, consume("a", "r1"), unavailable503()),
			op(1, 20, 30, consume("a", "r2"), ok(25)),
			op(2, 31, 40, consume("a", "r1"), used),
		), true},
		{"nonce: an unknown consume may take effect late, but only once", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, -1, consume("a", "r1"), unknown),
			op(1, 20, 30, get("a"), unused()),
			op(1, 31, 40, consume("a", "r2"), ok(35)),
			op(2, 41, 50, consume("a", "r1"), ok(45)),
		), false},
		{"nonce: 409 although nobody consumed", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, 20, consume("a", "r1"), used),
		), false},
		{"nonce: stale read after an acknowledged consume", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, 20, consume("a", "r1"), ok(15)),
			op(1, 21, 30, get("a"), unused()),
		), false},
		{"nonce: retry with the same request id answers another used_at", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, 20, consume("a", "r1"), ok(15)),
			op(0, 21, 30, consume("a", "r1"), ok(16)),
		), false},
		{"nonce: an issued nonce is unknown", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(0, 11, 20, get("a"), notFound),
		), false},
		{"nonce: keys are independent", NonceModel, hist(
			op(0, 0, 10, issue("a"), created),
			op(1, 0, 10, issue("b"), created),
			op(0, 11, 20, consume("a", "r1"), ok(15)),
			op(1, 11, 20, consume("b", "r2"), ok(15)),
		), true},

		// Device challenge and verify.
		{"device: verify once, replay refused", ChallengeModel, hist(
			op(0, 0, 10, challenge("c"), Output{Status: 200}),
			op(0, 11, 20, verify("c", true), verified()),
			op(1, 21, 30, verify("c", true), used),
		), true},
		{"device: verified twice", ChallengeModel, hist(
			op(0, 0, 10, challenge("c"), Output{Status: 200}),
			op(0, 11, 20, verify("c", true), verified()),
			op(1, 21, 30, verify("c", true), verified()),
		), false},
		{"device: racing verifies through two nodes both succeed", ChallengeModel, hist(
			op(0, 0, 10, challenge("c"), Output{Status: 200}),
			op(0, 11, 30, verify("c", true), verified()),
			op(1, 12, 29, verify("c", true), verified()),
		), false},
		{"device: a bad signature consumes the nonce", ChallengeModel, hist(
			op(0, 0, 10, challenge("c"), Output{Status: 200}),
			op(0, 11, 20, verify("c", false), badSig()),
			op(1, 21, 30, verify("c", true), used),
		), true},
		{"device: a bad signature verifies", ChallengeModel, hist(
			op(0, 0, 10, challenge("c"), Output{Status: 200}),
			op(0, 11, 20, verify("c", false), verified()),
		), false},
		{"device: a retried verify with its request_id gets the first outcome", ChallengeModel, hist(
			op(0, 0, 10, challenge("c"), Output{Status: 200}),
			op(0, 11, -1, verifyReq("c", true, "v1"), unknown),
			op(0, 21, 30, verifyReq("c", true, "v1"), verified()),
			op(1, 31, 40, verifyReq("c", true, "v2"), used),
		), true},
		{"device: another request_id verifies a consumed nonce", ChallengeModel, hist(
			op(0, 0, 10, challenge("c"), Output{Status: 200}),
			op(0, 11, 20, verifyReq("c", true, "v1"), verified()),
			op(1, 21, 30, verifyReq("c", true, "v2"), verified()),
		), false},
		{"device: a replay with the request_id changes the outcome", ChallengeModel, hist(
			op(0, 0, 10, challenge("c"), Output{Status: 200}),
			op(0, 11, 20, verifyReq("c", false, "v1"), badSig()),
			op(0, 21, 30, verifyReq("c", true, "v1"), verified()),
		), false},
		{"device: an unknown verify consumed the nonce", ChallengeModel, hist(
			op(0, 0, 10, challenge("c"), Output{Status: 200}),
			op(0, 11, -1, verify("c", true), unknown),
			op(1, 21, 30, verify("c", true), used),
		), true},

		// The server registry.
		{"servers: list sees the last acknowledged put", ServerModel, hist(
			op(0, 0, 10, put("r/s"), seen(100)),
			op(1, 11, 20, list("r/s"), listed(100)),
			op(0, 21, 30, put("r/s"), seen(105)),
			op(1, 31, 40, list("r/s"), listed(105)),
		), true},
		{"servers: a list concurrent with a put may see either value", ServerModel, hist(
			op(0, 0, 10, put("r/s"), seen(100)),
			op(0, 11, 30, put("r/s"), seen(105)),
			op(1, 12, 20, list("r/s"), listed(100)),
			op(2, 12, 20, list("r/s"), listed(105)),
		), true},
		{"servers: stale list after an acknowledged put", ServerModel, hist(
			op(0, 0, 10, put("r/s"), seen(100)),
			op(0, 11, 20, put("r/s"), seen(105)),
			op(1, 21, 30, list("r/s"), listed(100)),
		), false},
		{"servers: an acknowledged put is missing from a list", ServerModel, hist(
			op(0, 0, 10, put("r/s"), seen(100)),
			op(1, 21, 30, list("r/s"), absent()),
		), false},
		{"servers: a put with an unknown outcome may show up, later", ServerModel, hist(
			op(0, 0, 10, put("r/s"), seen(100)),
			op(0, 11, -1, put("r/s"), unknown),
			op(1, 21, 30, list("r/s"), listed(100)),
			op(1, 31, 40, list("r/s"), listed(120)),
		), true},
		{"servers: a list goes back in time", ServerModel, hist(
			op(0, 0, -1, put("r/s"), unknown),
			op(1, 21, 30, list("r/s"), listed(120)),
			op(1, 31, 40, list("r/s"), listed(100)),
		), false},
		{"servers: last_seen goes back", ServerModel, hist(
			op(0, 0, 10, put("r/s"), seen(100)),
			op(0, 11, 20, put("r/s"), seen(90)),
		), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Check(c.model, c.history, 10*time.Second, "", nil)
			if got := res.Result == porcupine.Ok; got != c.legal {
				t.Errorf("linearizable = %v (%s), want %v", got, res.Result, c.legal)
			}
		})
	}
}

// TestCheckVisualizesAnIllegalHistory: a nonce consumed twice among many legal ones is caught,
// named, listed, and visualized.
func TestCheckVisualizesAnIllegalHistory(t *testing.T) {
	var h []porcupine.Operation
	for i := range 50 {
		k := string(rune('A' + i%26))
		k += strings.Repeat("x", i/26)
		h = append(h,
			op(0, int64(100*i), int64(100*i+10), issue(k), created),
			op(0, int64(100*i+11), int64(100*i+20), consume(k, "r"), ok(1)))
	}
	h = append(h, op(1, 10000, 10010, consume("Q", "other"), ok(2)))
	html := filepath.Join(t.TempDir(), "nonces.html")
	res := Check(NonceModel, h, 10*time.Second, html, []porcupine.Annotation{{Tag: "faults", Start: 5000, Description: "SIGKILL n1"}})
	if res.Result != porcupine.Illegal || len(res.Illegal) != 1 || res.Illegal[0] != "Q" {
		t.Fatalf("result %s, illegal keys %v; want Illegal, [Q]", res.Result, res.Illegal)
	}
	if res.Visualization != html {
		t.Fatalf("visualization %q, want %q", res.Visualization, html)
	}
	if b, err := os.ReadFile(html); err != nil || len(b) < 1000 {
		t.Fatalf("visualization file: %d bytes, %v", len(b), err)
	}
	if !strings.Contains(res.Dump, "key Q") || !strings.Contains(res.Dump, "req=other") {
		t.Errorf("dump does not list the double consume:\n%s", res.Dump)
	}
	t.Logf("dump:\n%s", res.Dump)
}
