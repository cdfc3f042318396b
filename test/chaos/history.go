package chaos

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// Recorder collects a history of operations, with call and return times in nanoseconds
// since a common start (monotonic clock). Safe for concurrent use.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// NewRecorder starts a history at start (share one start among the histories of a run, so
// their times and the fault annotations line up).
func NewRecorder(start time.Time) *Recorder { return &Recorder{start: start} }

// Now is the time since the start, in nanoseconds.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Add records one operation.
func (r *Recorder) Add(client int, in Input, call, ret int64, out Output) {
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
}

// Ops returns a copy of the history so far.
func (r *Recorder) Ops() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// ClientIDs hands out porcupine client ids. A client whose operation ended with an unknown
// outcome takes a new id, because that operation stays open (it may take effect later) and
// the operations of one id must not overlap in the visualization.
type ClientIDs struct{ next atomic.Int64 }

// New returns an unused id.
func (c *ClientIDs) New() int { return int(c.next.Add(1) - 1) }
