package actors

import (
	"errors"
	"fmt"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// writeGate is the write path of one activation as a state machine: the activation feeds it
// finished messages, the decision point after each message, commit outcomes, leadership
// changes and failures, and it answers with what to do — a batch to propose, replies to
// release, whether to retire. Besides calling the replies it holds, it sends nothing, starts
// no goroutine and reads no clock, so every ordering of those inputs can be driven by a test
// (testdata/writegate); the activation does the sending.
//
// Invariants, after every method:
//   - at most one batch is in flight (inflight), and pending is never proposed before it
//     has committed: a key's writes commit in the order the actor made them;
//   - every reply of a message that wrote, or that read an uncommitted write, is held by the
//     batch carrying those writes (or the in-flight one) until its commit outcome is known;
//   - overlay holds every uncommitted write (the latest per key), so later messages read
//     their own actor's writes before they commit; an entry leaves it when the batch
//     carrying its latest write commits;
//   - once retired, nothing is proposed and every held reply has been answered.
type writeGate struct {
	epoch   uint64 // the partition's leadership epoch the activation was created under
	overlay map[string]*overlayEntry
	seq     uint64 // numbers writes, so that a commit removes only entries not written since

	pending  *batch // writes not yet proposed, with the replies waiting on them
	inflight *batch // the batch proposed and not yet resolved
	retired  bool
	// restart, once set, is the answer to every new message: the activation lost track of its
	// effects (Activate or HandleEffect failed) and retires as soon as nothing it wrote awaits
	// a commit, so that the next activation reconciles from storage.
	restart error
}

func newWriteGate(epoch uint64) writeGate {
	return writeGate{epoch: epoch, overlay: map[string]*overlayEntry{}}
}

// usable says why a new message may not run, or nil. current is the partition's leadership
// epoch now: an activation of an earlier one must not run anything (its partition was led
// elsewhere since, and its state may have moved on).
func (g *writeGate) usable(current uint64, kind, id string, part uint32) error {
	switch {
	case g.restart != nil:
		return g.restart
	case g.retired:
		return NotApplied("actor %s/%s is restarting after a failed commit", kind, id)
	case current != g.epoch:
		return NotApplied("partition %d is no longer led by this node", part)
	}
	return nil
}

// restartAfter marks the activation for restart (see restart).
func (g *writeGate) restartAfter(kind, id string, cause error) {
	if g.restart == nil {
		g.restart = NotApplied("actor %s/%s is restarting: %v", kind, id, cause)
	}
}

// read returns the uncommitted value of key, if the activation holds one (deleted: a delete).
func (g *writeGate) read(key []byte) (value []byte, deleted, ok bool) {
	e, ok := g.overlay[string(key)]
	if !ok {
		return nil, false, false
	}
	return e.value, e.deleted, true
}

// replyFate is what stage did with a reply.
type replyFate int

const (
	heldPending  replyFate = iota // waits for the pending batch, which carries its writes
	heldInflight                  // waits for the batch in flight, whose writes it read
	answered                      // the writes it read had committed: answered already
	needsLeader                   // depends on nothing uncommitted: the caller must verify leadership first
)

// stage takes a finished message: its writes go into the pending batch (a later write of a
// key in the same batch replaces the earlier one in place) and its reply waits for every
// write it may depend on. now is the leader's clock of the message, carried in the command.
func (g *writeGate) stage(writes []write, now int64, reply func(error)) replyFate {
	switch {
	case len(writes) > 0:
		if g.pending == nil {
			g.pending = &batch{}
		}
		b := g.pending
		for _, w := range writes {
			g.seq++
			op := persistence.Op{Key: w.key, Value: w.value, Delete: w.deleted}
			if e := g.overlay[string(w.key)]; e != nil && e.batch == b {
				e.value, e.deleted, e.seq = w.value, w.deleted, g.seq
				b.ops[e.pos], b.seqs[e.pos] = op, g.seq
			} else {
				g.overlay[string(w.key)] = &overlayEntry{value: w.value, deleted: w.deleted, seq: g.seq, batch: b, pos: len(b.ops)}
				b.ops = append(b.ops, op)
				b.seqs = append(b.seqs, g.seq)
			}
			if !w.deleted && len(w.key) > 0 && w.key[0] == secIndex {
				b.setsAlarm = true
			}
		}
		b.messages++
		b.time = max(b.time, now)
		b.held = append(b.held, reply)
		return heldPending
	case g.pending != nil:
		g.pending.held = append(g.pending.held, reply) // not proposed yet: no other goroutine sees it
		return heldPending
	case g.inflight != nil:
		if !g.inflight.hold(reply) {
			reply(nil) // the writes it read have committed
			return answered
		}
		return heldInflight
	}
	return needsLeader
}

// next returns the pending batch to propose now, which is then in flight, or nil. A batch is
// proposed when nothing is in flight and either no more messages are queued (queued false) or
// it holds maxMessages replies; an activation about to restart proposes at once, since the
// messages queued will be refused and cannot grow the batch.
func (g *writeGate) next(queued bool, maxMessages int) *batch {
	b := g.pending
	if b == nil || g.inflight != nil || g.retired {
		return nil
	}
	if g.restart == nil && queued && len(b.held) < maxMessages {
		return nil // the next message will propose; the batch grows meanwhile
	}
	g.pending, g.inflight = nil, b
	return b
}

// committed takes the commit outcome of b. It reports false when b is not the batch in flight
// (the activation failed it already when it retired), and the error to fail the activation
// with when the commit failed. On success the replies b held are released and the overlay
// forgets the writes b made that no later write replaced.
func (g *writeGate) committed(b *batch, err error) (current bool, failure error) {
	if b != g.inflight {
		return false, nil
	}
	if err != nil {
		// The cause stays visible to errors.Is (persistence.ErrDiskLow, for one).
		failure = fmt.Errorf("%w: commit failed: %w", ErrUnavailable, err)
		if errors.Is(err, ErrNotApplied) { // fenced before it was proposed
			failure = notApplied(failure)
		}
		return true, failure
	}
	g.inflight = nil
	for i, op := range b.ops {
		if e, ok := g.overlay[string(op.Key)]; ok && e.seq == b.seqs[i] {
			delete(g.overlay, string(op.Key))
		}
	}
	b.release(nil) // normally done already by the commit callback
	return true, nil
}

// retire marks the activation retired, reporting whether it was not already. The activation
// leaves its partition's registry then, before failAll answers anything: a caller that sees
// its failure and sends again must reach a fresh activation, not this one.
func (g *writeGate) retire() (first bool) {
	first = !g.retired
	g.retired = true
	return first
}

// failAll answers every held reply with err — those of the pending batch, never proposed, as
// not applied — and drops every uncommitted write.
func (g *writeGate) failAll(err error) {
	if g.inflight != nil {
		g.inflight.release(err)
	}
	if g.pending != nil {
		g.pending.release(notApplied(err))
	}
	g.inflight, g.pending, g.overlay = nil, nil, map[string]*overlayEntry{}
}

// idle reports whether nothing the activation wrote awaits a commit.
func (g *writeGate) idle() bool { return g.pending == nil && g.inflight == nil }

// dueRestart reports whether an activation marked for restart should retire now: only once
// nothing it wrote awaits a commit, or the next activation could read state that a batch
// still in flight is about to change.
func (g *writeGate) dueRestart() bool { return g.restart != nil && !g.retired && g.idle() }
