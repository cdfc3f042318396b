package actors

import (
	"sync"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// proposer merges the batches of every activation of one Raft group's partitions into Raft
// commands.
//
// Each activation has at most one batch in flight, and activations write disjoint keys, so
// batches of different actors commute: they may share a command, and commands may commit in
// any order. While one command of the group is in flight, newly submitted batches wait and go
// out together in the next, so under load many actors' messages, of every partition of the
// group, share one Raft entry (and one round, one apply), not just one fsync.
//
// Fencing: a batch built under an older leadership epoch of its partition is never proposed
// (it is failed instead), and a group regaining the leadership waits until every command
// taken before (waitResolved) has resolved before the Barrier that readies its partitions, so
// a stale activation's writes can never land after a new activation has read the state they
// would overwrite.
type proposer struct {
	grp *group

	mu       sync.Mutex
	changed  *sync.Cond // signalled when a command resolves or inflight turns false
	queue    []submission
	inflight bool
	taken    uint64 // commands taken from the queue
	resolved uint64 // commands whose outcome is known
}

type submission struct {
	b     *batch
	part  *partition
	epoch uint64
	done  func(error)
}

// maxCommandOps bounds one merged command; larger backlogs go out as several commands.
const maxCommandOps = 8192

// submit queues b, a batch of part built under epoch, for proposal; done is called once with
// its commit outcome.
func (pr *proposer) submit(part *partition, b *batch, epoch uint64, done func(error)) {
	pr.mu.Lock()
	pr.queue = append(pr.queue, submission{b, part, epoch, done})
	var next []submission
	if !pr.inflight {
		next = pr.takeLocked()
	}
	pr.mu.Unlock()
	if next != nil {
		go pr.propose(next)
	}
}

// takeLocked removes the next command's worth of submissions from the queue and marks a
// command in flight; pr.mu is held.
func (pr *proposer) takeLocked() []submission {
	fresh := pr.queue[:0]
	for _, s := range pr.queue {
		if s.epoch != s.part.currentEpoch() {
			s.done(NotApplied("partition %d changed leadership before the commit was proposed", s.part.id))
			continue
		}
		fresh = append(fresh, s)
	}
	pr.queue = fresh
	if len(pr.queue) == 0 {
		pr.inflight = false
		pr.changed.Broadcast()
		return nil
	}
	n, ops := 0, 0
	for n < len(pr.queue) && (n == 0 || ops+len(pr.queue[n].b.ops) <= maxCommandOps) {
		ops += len(pr.queue[n].b.ops)
		n++
	}
	next := pr.queue[:n:n]
	pr.queue = append([]submission(nil), pr.queue[n:]...)
	pr.inflight = true
	pr.taken++
	return next
}

// waitResolved returns once every command taken before the call has resolved.
func (pr *proposer) waitResolved() {
	pr.mu.Lock()
	for target := pr.taken; pr.resolved < target; {
		pr.changed.Wait()
	}
	pr.mu.Unlock()
}

// waitIdle returns once nothing is queued or in flight.
func (pr *proposer) waitIdle() {
	pr.mu.Lock()
	for pr.inflight {
		pr.changed.Wait()
	}
	pr.mu.Unlock()
}

func (pr *proposer) propose(next []submission) {
	for next != nil {
		cmd := persistence.Command{}
		messages, ops := 0, 0
		for _, s := range next {
			ops += len(s.b.ops)
		}
		cmd.Ops = make([]persistence.Op, 0, ops)
		for _, s := range next {
			for _, op := range s.b.ops {
				op.Partition = s.part.id
				cmd.Ops = append(cmd.Ops, op)
			}
			cmd.Time = max(cmd.Time, s.b.time)
			messages += s.b.messages
		}
		err := pr.grp.rt.repl.Propose(pr.grp.span.ID, cmd.EncodeFor(pr.grp.span, nil)).Error()
		if err == nil {
			pr.grp.rt.metrics.commitMessages.Observe(float64(messages))
		}
		for _, s := range next {
			s.done(err)
		}
		pr.mu.Lock()
		pr.resolved++
		pr.changed.Broadcast()
		next = pr.takeLocked()
		pr.mu.Unlock()
	}
}
