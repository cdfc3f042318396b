package actors

import (
	"sync"
	"sync/atomic"
)

// dispatcher runs protoactor mailbox turns on long-lived worker goroutines.
//
// protoactor's default dispatcher starts a goroutine for every turn of a mailbox that was
// idle, and under request/reply load nearly every message finds its mailbox idle. A fresh
// goroutine starts with a small stack, and a handler reading Pebble or decoding JSON grows
// it by copying — about 6% of the CPU of the nonce path. Workers keep their grown stacks.
//
// Schedule hands the turn to a parked worker when one is waiting, and otherwise starts a
// goroutine that runs it and then parks as a worker while fewer than maxWorkers are parked,
// so a burst never waits for a worker and the pool is bounded. Turns never block on each
// other: a turn is only handed to a worker that is already waiting for one.
type dispatcher struct {
	work       chan func()
	stop       chan struct{}
	stopOnce   sync.Once
	parked     atomic.Int32
	maxWorkers int32
}

// dispatcherThroughput is the number of messages a mailbox turn handles before yielding,
// protoactor's default.
const dispatcherThroughput = 300

func newDispatcher(maxWorkers int) *dispatcher {
	return &dispatcher{work: make(chan func()), stop: make(chan struct{}), maxWorkers: int32(maxWorkers)}
}

// Schedule runs fn on a worker (protoactor's actor.Dispatcher).
func (d *dispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		go d.run(fn)
	}
}

// Throughput is protoactor's per-turn message budget.
func (d *dispatcher) Throughput() int { return dispatcherThroughput }

func (d *dispatcher) run(fn func()) {
	for {
		fn()
		if !d.park() {
			return
		}
		select {
		case fn = <-d.work:
			d.parked.Add(-1)
		case <-d.stop:
			d.parked.Add(-1)
			return
		}
	}
}

// park counts the caller as a parked worker, unless maxWorkers are parked already: the count
// never goes past the bound, not even for a moment.
func (d *dispatcher) park() bool {
	for {
		n := d.parked.Load()
		if n >= d.maxWorkers {
			return false
		}
		if d.parked.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// close releases the parked workers; turns scheduled later still run, on new goroutines.
func (d *dispatcher) close() { d.stopOnce.Do(func() { close(d.stop) }) }
