package chaos

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Operation kinds of the chain history; Input.Key is "<entity_id>/<ver>".
const (
	OpAppend  = "append"  // POST /v1/chains/{chain}/events with body Input.Content
	OpVersion = "version" // GET /v1/chains/{chain}/entities/{entity_id}/versions/{ver}
)

// versionState is one accepted version as the clients can know it: whether it exists, the
// body it was accepted with, and its seq once an answer showed one.
type versionState struct {
	Exists  bool
	Content string
	Seq     int64
}

// ChainModel is one version of an entity in a chain. An append creates it at most once: 201
// only while it does not exist (with the CID of the body sent), 200 only for the body it was
// accepted with, 409 event_conflict only for another; an append with an unknown outcome may
// have created it or not. A read is 404 unknown_version before it exists, and afterwards
// shows the body it was accepted with. Its seq, once a read showed it, never changes nor goes
// back to none: an event keeps its place in the chain (signed again after an anchor expiry,
// it keeps its seq). (An append's answer carries no seq.)
var ChainModel = (&porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []any { return []any{versionState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(versionState), input.(Input), output.(Output)
		switch in.Op {
		case OpAppend:
			switch {
			case out.Unknown && s.Exists:
				return []any{s}
			case out.Unknown:
				return []any{s, versionState{Exists: true, Content: in.Content}}
			case out.Status == 201 && !s.Exists && out.Content == in.Content:
				return observeVersion(versionState{Exists: true, Content: in.Content}, out)
			case out.Status == 200 && s.Exists && s.Content == in.Content:
				return observeVersion(s, out)
			case out.Status == 409 && out.Code == "event_conflict" && s.Exists && s.Content != in.Content:
				return []any{s}
			}
			return nil
		case OpVersion:
			switch {
			case out.Unknown:
				return []any{s}
			case out.Status == 404 && out.Code == "unknown_version" && !s.Exists:
				return []any{s}
			case out.Status == 200 && s.Exists && (out.Seq != 0 || s.Seq == 0):
				return observeVersion(s, out) // (a version once signed shows its seq for good)
			}
			return nil
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(Input), output.(Output)
		d := in.Op
		if in.Op == OpAppend {
			d += " " + in.Content
		}
		if in.Node != "" {
			d += "@" + in.Node
		}
		d += " → " + out.String()
		if !out.Unknown && out.Content != "" {
			d += fmt.Sprintf(" body %s seq %d", out.Content, out.Seq)
		}
		return d
	},
	DescribeState: func(state any) string {
		s := state.(versionState)
		if !s.Exists {
			return "absent"
		}
		return fmt.Sprintf("body %s seq %d", s.Content, s.Seq)
	},
}).ToModel()

// observeVersion takes an answer that showed the version.
func observeVersion(s versionState, out Output) []any {
	switch {
	case out.Content != s.Content:
		return nil
	case out.Seq != 0 && s.Seq != 0 && out.Seq != s.Seq:
		return nil
	case out.Seq != 0:
		s.Seq = out.Seq
	}
	return []any{s}
}
