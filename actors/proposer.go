package actors

import (
	"sync"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// proposer merges the batches of every activation of one partition into Raft commands.
//
// Each activation has at most one batch in flight, and activations write disjoint keys, so
// batches of different actors commute: they may share a command, and commands may commit in
// any order. While one command of the partition is in flight, newly submitted batches wait
// and go out together in the next, so under load many actors' messages share one Raft entry
// (and one apply), not just one fsync.
//
// Fencing: a batch built under an older leadership epoch is never proposed (it is failed
// instead), and a partition becoming ready again waits until no command is in flight before
// its Barrier, so a stale activation's writes can never land after a new activation has read
// the state they would overwrite.
type proposer struct {
	part *partition

	mu       sync.Mutex
	idle     *sync.Cond // signalled when inflight turns false
	queue    []submission
	inflight bool
}

type submission struct {
	b     *batch
	epoch uint64
	done  func(error)
}

// maxCommandOps bounds one merged command; larger backlogs go out as several commands.
const maxCommandOps = 8192

// submit queues b for proposal; done is called once with its commit outcome.
func (pr *proposer) submit(b *batch, epoch uint64, done func(error)) {
	pr.mu.Lock()
	pr.queue = append(pr.queue, submission{b, epoch, done})
	var group []submission
	if !pr.inflight {
		group = pr.takeLocked()
	}
	pr.mu.Unlock()
	if group != nil {
		go pr.propose(group)
	}
}

// takeLocked removes the next command's worth of submissions from the queue and marks a
// command in flight; pr.mu is held.
func (pr *proposer) takeLocked() []submission {
	epoch := pr.part.currentEpoch()
	fresh := pr.queue[:0]
	for _, s := range pr.queue {
		if s.epoch != epoch {
			s.done(NotApplied("partition %d changed leadership before the commit was proposed", pr.part.id))
			continue
		}
		fresh = append(fresh, s)
	}
	pr.queue = fresh
	if len(pr.queue) == 0 {
		pr.inflight = false
		pr.idle.Broadcast()
		return nil
	}
	n, ops := 0, 0
	for n < len(pr.queue) && (n == 0 || ops+len(pr.queue[n].b.ops) <= maxCommandOps) {
		ops += len(pr.queue[n].b.ops)
		n++
	}
	group := pr.queue[:n:n]
	pr.queue = append([]submission(nil), pr.queue[n:]...)
	pr.inflight = true
	return group
}

// waitIdle returns once no command of this partition is in flight.
func (pr *proposer) waitIdle() {
	pr.mu.Lock()
	for pr.inflight {
		pr.idle.Wait()
	}
	pr.mu.Unlock()
}

func (pr *proposer) propose(group []submission) {
	for group != nil {
		cmd := persistence.Command{}
		messages := 0
		for _, s := range group {
			cmd.Ops = append(cmd.Ops, s.b.ops...)
			cmd.Time = max(cmd.Time, s.b.time)
			messages += s.b.messages
		}
		err := pr.part.rt.repl.Propose(pr.part.id, cmd.Encode(nil)).Error()
		if err == nil {
			pr.part.rt.metrics.commitMessages.Observe(float64(messages))
		}
		for _, s := range group {
			s.done(err)
		}
		pr.mu.Lock()
		group = pr.takeLocked()
		pr.mu.Unlock()
	}
}
