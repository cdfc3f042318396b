// Package chaos is shardkeeper's fault-injection suite: a real three-node cluster (separate
// processes of cmd/shardkeeper, one loopback address each), clients that record every request
// they send through every node, faults (SIGKILL, SIGSTOP, restarts, wiped disks, rolling
// SIGTERM, network partitions with nftables), and checks after each fault: the recorded
// histories must be linearizable under the models of this file (checked with porcupine), and
// the replicas of every partition must converge to the same state hash.
//
// The models are written for histories in which an operation may have an unknown outcome (a
// timeout, a broken connection, a 503): such an operation may or may not have taken effect,
// so it is given a return time after every other operation (it may linearize anywhere after
// its call) and the model lets it either take effect or not.
package chaos

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Operation kinds (Input.Op).
const (
	OpIssue     = "issue"     // POST /v1/nonces (recorded only when it returned a nonce)
	OpConsume   = "consume"   // POST /v1/nonces/{nonce}/consume
	OpGet       = "get"       // GET /v1/nonces/{nonce}
	OpChallenge = "challenge" // POST /v1/attest/{registry}/challenge (recorded when it returned)
	OpVerify    = "verify"    // POST /v1/attest/{registry}/verify
	OpPut       = "put"       // PUT /v1/servers/{registry}/{server_id}
	OpList      = "list"      // GET /v1/servers/{registry}, projected on one server
)

// Input is what one operation asked. Key is the object the operation is about (a nonce, a
// challenge nonce, or "registry/server_id") and partitions the history.
type Input struct {
	Op        string
	Key       string
	RequestID string // consume, verify
	ValidSig  bool   // verify: the signature is the device's real one
	Node      string // the node the request was sent to (for the visualization)
	Content   string // chain append: which of the version's bodies it sent
}

// Output is what one operation got back.
type Output struct {
	// Unknown is set when the outcome is unknown: timeout, broken connection, 503, or an
	// answer that could not be read. Such an operation may or may not have taken effect.
	Unknown bool
	Status  int    // HTTP status when answered
	Code    string // the error code of a non-2xx answer
	// UsedAt is used_at of a consume (200) or get (200; 0 for null).
	UsedAt int64
	// LastSeen is last_seen of a put (2xx) or of the server in a list.
	LastSeen int64
	// Present says whether a list contained the server.
	Present bool
	// Intent and TxHash are the status and tx_hash of the relayer intent record an answer
	// carried (submit 200/201, read 200); TxHash is "" while it has none.
	Intent string
	TxHash string
	// Content and Seq are what a chain answer (append 200/201, version 200) showed of the
	// version: whose body's CID it carried, and its seq (0 before it is signed).
	Content string
	Seq     int64
	Err     string // transport error text, for the visualization
}

func (o Output) String() string {
	switch {
	case o.Unknown && o.Status != 0:
		return fmt.Sprintf("unknown (%d %s)", o.Status, o.Code)
	case o.Unknown:
		return "unknown (" + o.Err + ")"
	case o.Code != "":
		return fmt.Sprintf("%d %s", o.Status, o.Code)
	default:
		return fmt.Sprintf("%d", o.Status)
	}
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range history {
		k := op.Input.(Input).Key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

func describeOp(in, out any) string {
	i, o := in.(Input), out.(Output)
	var b strings.Builder
	b.WriteString(i.Op)
	switch i.Op {
	case OpConsume:
		fmt.Fprintf(&b, "(req=%s)", short(i.RequestID))
	case OpVerify:
		if !i.ValidSig {
			b.WriteString("(bad sig)")
		}
	}
	if i.Node != "" {
		fmt.Fprintf(&b, "@%s", i.Node)
	}
	b.WriteString(" → ")
	b.WriteString(o.String())
	switch {
	case o.Unknown:
	case i.Op == OpConsume && o.Status == 200, i.Op == OpGet && o.Status == 200:
		fmt.Fprintf(&b, " used_at=%d", o.UsedAt)
	case i.Op == OpPut && o.Status/100 == 2:
		fmt.Fprintf(&b, " last_seen=%d", o.LastSeen)
	case i.Op == OpList && o.Present:
		fmt.Fprintf(&b, " last_seen=%d", o.LastSeen)
	case i.Op == OpList:
		b.WriteString(" absent")
	}
	return b.String()
}

func short(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// nonceState is one oracle nonce. UsedAt 0 with Used set means it was used by an operation
// whose outcome is unknown, so its used_at was never seen.
type nonceState struct {
	Issued bool
	Used   bool
	ReqID  string
	UsedAt int64
}

// NonceModel is the nonce oracle, per nonce: issue creates it; a consume succeeds at most
// once; a consume repeated with the request_id that used the nonce gets 200 with the same
// used_at again; any other consume of a used nonce gets 409 nonce_used; get reports used_at
// (null while unused); a nonce never issued is 404 unknown_nonce.
var NonceModel = (&porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []any { return []any{nonceState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(nonceState), input.(Input), output.(Output)
		switch in.Op {
		case OpIssue:
			if s.Issued || out.Unknown {
				return nil
			}
			return []any{nonceState{Issued: true}}
		case OpConsume:
			if out.Unknown {
				next := []any{s}
				if s.Issued && !s.Used {
					next = append(next, nonceState{Issued: true, Used: true, ReqID: in.RequestID})
				}
				return next
			}
			switch {
			case out.Status == 200 && s.Issued && !s.Used:
				return []any{nonceState{Issued: true, Used: true, ReqID: in.RequestID, UsedAt: out.UsedAt}}
			case out.Status == 200 && s.Used && in.RequestID != "" && in.RequestID == s.ReqID && (s.UsedAt == 0 || s.UsedAt == out.UsedAt):
				s.UsedAt = out.UsedAt
				return []any{s}
			case out.Status == 409 && out.Code == "nonce_used" && s.Used && (in.RequestID == "" || in.RequestID != s.ReqID):
				return []any{s}
			case out.Status == 404 && out.Code == "unknown_nonce" && !s.Issued:
				return []any{s}
			}
			return nil
		case OpGet:
			if out.Unknown {
				return []any{s}
			}
			switch {
			case out.Status == 200 && out.UsedAt == 0 && s.Issued && !s.Used:
				return []any{s}
			case out.Status == 200 && out.UsedAt != 0 && s.Used && (s.UsedAt == 0 || s.UsedAt == out.UsedAt):
				s.UsedAt = out.UsedAt
				return []any{s}
			case out.Status == 404 && out.Code == "unknown_nonce" && !s.Issued:
				return []any{s}
			}
			return nil
		}
		return nil
	},
	DescribeOperation: describeOp,
	DescribeState: func(state any) string {
		s := state.(nonceState)
		switch {
		case !s.Issued:
			return "absent"
		case !s.Used:
			return "unused"
		default:
			return fmt.Sprintf("used(req=%s, at=%d)", short(s.ReqID), s.UsedAt)
		}
	},
}).ToModel()

// challengeState is one device challenge nonce. ReqID and ValidSig are those of the verify
// that consumed it (a verify repeated with that request_id gets the same outcome again).
type challengeState struct {
	Issued   bool
	Consumed bool
	ReqID    string
	ValidSig bool
}

// ChallengeModel is device challenge/verify, per challenge nonce: the challenge creates it;
// the first verify consumes it whatever its outcome (200 with the device's signature, 401
// invalid_signature with another); a verify repeated with the request_id that consumed it
// gets that outcome again; every other later verify is 409 nonce_used.
var ChallengeModel = (&porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []any { return []any{challengeState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(challengeState), input.(Input), output.(Output)
		switch in.Op {
		case OpChallenge:
			if s.Issued || out.Unknown {
				return nil
			}
			return []any{challengeState{Issued: true}}
		case OpVerify:
			consumed := challengeState{Issued: true, Consumed: true, ReqID: in.RequestID, ValidSig: in.ValidSig}
			if out.Unknown {
				if s.Issued && !s.Consumed {
					return []any{s, consumed}
				}
				return []any{s}
			}
			sameReq := s.Consumed && in.RequestID != "" && in.RequestID == s.ReqID
			switch {
			case out.Status == 200 && in.ValidSig && s.Issued && !s.Consumed,
				out.Status == 401 && out.Code == "invalid_signature" && !in.ValidSig && s.Issued && !s.Consumed:
				return []any{consumed}
			case sameReq && out.Status == 200 && s.ValidSig,
				sameReq && out.Status == 401 && out.Code == "invalid_signature" && !s.ValidSig:
				return []any{s}
			case out.Status == 409 && out.Code == "nonce_used" && s.Consumed && !sameReq:
				return []any{s}
			case out.Status == 404 && out.Code == "unknown_nonce" && !s.Issued:
				return []any{s}
			}
			return nil
		}
		return nil
	},
	DescribeOperation: describeOp,
	DescribeState: func(state any) string {
		s := state.(challengeState)
		switch {
		case !s.Issued:
			return "absent"
		case s.Consumed:
			return "consumed"
		default:
			return "pending"
		}
	},
}).ToModel()

// serverState is one server registry entry, a register of last_seen. Wild means a put with
// an unknown outcome was linearized since the value was last known: the entry may hold any
// last_seen ≥ LastSeen (or still LastSeen, or be absent if it was absent).
type serverState struct {
	Present  bool
	LastSeen int64
	Wild     bool
}

// ServerModel is the server registry, per (registry, server_id), as a register of last_seen:
// an acknowledged put sets it to the last_seen it returned (never below the current one: the
// partition clock does not go back); a list shows exactly the current value, so it contains
// the server with last_seen ≥ that of every put acknowledged before the list began.
var ServerModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return serverState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(serverState), input.(Input), output.(Output)
		switch in.Op {
		case OpPut:
			if out.Unknown {
				s.Wild = true
				return true, s
			}
			if out.Status/100 != 2 || (s.Present && out.LastSeen < s.LastSeen) {
				return false, s
			}
			return true, serverState{Present: true, LastSeen: out.LastSeen}
		case OpList:
			if out.Unknown {
				return true, s
			}
			if out.Status != 200 {
				return false, s
			}
			switch {
			case !out.Present:
				return !s.Present, serverState{}
			case s.Wild:
				return !s.Present || out.LastSeen >= s.LastSeen, serverState{Present: true, LastSeen: out.LastSeen}
			default:
				return s.Present && out.LastSeen == s.LastSeen, s
			}
		}
		return false, s
	},
	DescribeOperation: describeOp,
	DescribeState: func(state any) string {
		s := state.(serverState)
		v := "absent"
		if s.Present {
			v = fmt.Sprintf("last_seen=%d", s.LastSeen)
		}
		if s.Wild {
			v += " (or a later unknown put)"
		}
		return v
	},
}

// CheckResult is the outcome of checking one history.
type CheckResult struct {
	Result porcupine.CheckResult
	// Illegal lists, for an illegal history, the keys whose sub-history is not linearizable.
	Illegal []string
	// Visualization is the HTML file written for an illegal history ("" if none).
	Visualization string
	// Dump is a text listing of the first illegal keys' operations, for the test log.
	Dump string
}

// Check checks history against model. When it is illegal, it finds the keys at fault,
// writes porcupine's visualization of their operations (with annotations) to htmlPath, and
// lists them in Dump. A check that exceeds timeout is porcupine.Unknown.
func Check(model porcupine.Model, history []porcupine.Operation, timeout time.Duration, htmlPath string, notes []porcupine.Annotation) CheckResult {
	history = closeUnknown(history)
	res := CheckResult{Result: porcupine.CheckOperationsTimeout(model, history, timeout)}
	if res.Result != porcupine.Illegal {
		return res
	}
	var bad []porcupine.Operation
	var dump strings.Builder
	for _, part := range partitionByKey(history) {
		if porcupine.CheckOperationsTimeout(model, part, timeout) != porcupine.Illegal {
			continue
		}
		key := part[0].Input.(Input).Key
		res.Illegal = append(res.Illegal, key)
		if len(res.Illegal) > 10 {
			continue
		}
		bad = append(bad, part...)
		sorted := slices.Clone(part)
		slices.SortFunc(sorted, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		fmt.Fprintf(&dump, "  key %s:\n", key)
		for _, op := range sorted {
			ret := fmt.Sprintf("%.3fs", float64(op.Return)/1e9)
			if op.Output.(Output).Unknown {
				ret = "∞"
			}
			fmt.Fprintf(&dump, "    [%.3fs, %s] client %d: %s\n", float64(op.Call)/1e9, ret, op.ClientId,
				model.DescribeOperation(op.Input, op.Output))
		}
	}
	res.Dump = dump.String()
	if htmlPath != "" && len(bad) > 0 {
		_, info := porcupine.CheckOperationsVerbose(model, bad, timeout)
		info.AddAnnotations(notes)
		if err := os.MkdirAll(filepath.Dir(htmlPath), 0o755); err == nil {
			if err := porcupine.VisualizePath(model, info, htmlPath); err == nil {
				res.Visualization = htmlPath
			}
		}
	}
	return res
}

// closeUnknown gives every operation with an unknown outcome a return time after every
// other operation's: it may have taken effect at any time after its call.
func closeUnknown(history []porcupine.Operation) []porcupine.Operation {
	var last int64
	for _, op := range history {
		last = max(last, op.Return, op.Call)
	}
	out := slices.Clone(history)
	for i := range out {
		if out[i].Output.(Output).Unknown {
			out[i].Return = last + 1
		}
	}
	return out
}
