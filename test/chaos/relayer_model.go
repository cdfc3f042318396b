package chaos

import (
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Operation kinds of the relayer history (Input.Op); Input.Key is the idempotency key.
const (
	OpSubmit = "submit" // POST /v1/relayers/{account_id}/intents (always the same body per key)
	OpRead   = "read"   // GET /v1/relayers/{account_id}/intents/{idempotency_key}[?wait=]
)

// Intent statuses as the API names them.
const (
	intentQueued    = "queued"
	intentSubmitted = "submitted"
	intentSucceeded = "succeeded"
	intentFailed    = "failed"
	intentRejected  = "rejected"
)

func intentTerminal(status string) bool {
	return status == intentSucceeded || status == intentFailed || status == intentRejected
}

// intentState is one relayer intent record as the clients can know it: whether it exists,
// and, once an answer showed it terminal, that status and its tx hash.
type intentState struct {
	Exists   bool
	Terminal string // "" while no linearized answer showed it terminal
	Hash     string // the terminal answer's tx_hash
}

// RelayerModel is the relayer intent record, per idempotency key, every submit of a key
// carrying the same body. A submit creates the record at most once: 201 only while it does
// not exist, 200 (the identical repeat) only once it does; a submit with an unknown outcome
// may have created it or not; a 429 (queue_full) changes nothing. A read is 404
// unknown_intent before the record exists and shows it after. Every answer showing the
// record (submit 200/201, read 200) shows its current status: non-terminal statuses
// (queued, submitted) come in any order and with any tx_hash (a transaction proven dead is
// signed again), but once an answer showed a terminal status with tx hash H, every later
// answer shows that same status and H. Reads with an unknown outcome have no effect.
var RelayerModel = (&porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []any { return []any{intentState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(intentState), input.(Input), output.(Output)
		switch in.Op {
		case OpSubmit:
			if out.Unknown {
				if s.Exists {
					return []any{s}
				}
				return []any{s, intentState{Exists: true}}
			}
			switch {
			case out.Status == 201 && !s.Exists, out.Status == 200 && s.Exists:
				s.Exists = true
				return observeIntent(s, out)
			case out.Status == 429:
				return []any{s}
			}
			return nil
		case OpRead:
			switch {
			case out.Unknown:
				return []any{s}
			case out.Status == 200 && s.Exists:
				return observeIntent(s, out)
			case out.Status == 404 && out.Code == "unknown_intent" && !s.Exists:
				return []any{s}
			}
			return nil
		}
		return nil
	},
	DescribeOperation: describeRelayerOp,
	DescribeState: func(state any) string {
		s := state.(intentState)
		switch {
		case !s.Exists:
			return "absent"
		case s.Terminal == "":
			return "pending"
		default:
			return fmt.Sprintf("%s tx=%s", s.Terminal, short(s.Hash))
		}
	},
}).ToModel()

// observeIntent takes an answer that showed the record.
func observeIntent(s intentState, out Output) []any {
	switch {
	case s.Terminal != "":
		if out.Intent != s.Terminal || out.TxHash != s.Hash {
			return nil
		}
	case intentTerminal(out.Intent):
		s.Terminal, s.Hash = out.Intent, out.TxHash
	case out.Intent != intentQueued && out.Intent != intentSubmitted:
		return nil
	}
	return []any{s}
}

func describeRelayerOp(in, out any) string {
	i, o := in.(Input), out.(Output)
	var b strings.Builder
	b.WriteString(i.Op)
	if i.Node != "" {
		fmt.Fprintf(&b, "@%s", i.Node)
	}
	b.WriteString(" → ")
	b.WriteString(o.String())
	if !o.Unknown && o.Intent != "" {
		fmt.Fprintf(&b, " %s", o.Intent)
		if o.TxHash != "" {
			fmt.Fprintf(&b, " tx=%s", short(o.TxHash))
		}
	}
	return b.String()
}
