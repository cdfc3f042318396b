package chaos

import (
	"sync"
	"testing"
	"time"
)

// progress is what a test's workers change and its controller waits on: the workers change
// it in Update, the controller waits in WaitFor until a condition on it holds.
type progress struct {
	mu   sync.Mutex
	cond *sync.Cond
}

func newProgress() *progress {
	p := &progress{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Update runs f under the lock and wakes the waiters.
func (p *progress) Update(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
	p.cond.Broadcast()
}

// WaitFor waits until ok, called under the lock, holds; after timeout it logs that what was
// not reached and returns (the test goes on: its checks say whether that mattered).
func (p *progress) WaitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	timer := time.AfterFunc(timeout, func() { p.Update(func() {}) })
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	p.mu.Lock()
	defer p.mu.Unlock()
	for !ok() {
		if time.Now().After(deadline) {
			t.Logf("%s: not reached within %s; going on", what, timeout)
			return
		}
		p.cond.Wait()
	}
}
