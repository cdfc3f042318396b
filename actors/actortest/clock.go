package actortest

import (
	"context"
	"sync"
	"time"
)

// Clock is a fake clock that moves only when the test moves it, or when something sleeps on
// it: Sleep advances it at once and records the wait, so waits are measured exactly, never
// with the wall clock. Give Now to actors.Options.Clock (the partition clock) or to anything
// else that takes a clock.
//
// The runtime's alarm scheduler sleeps by the wall clock. A clock started ahead of the wall
// clock (NewClock(time.Now().Add(time.Hour))) never has the scheduler see an alarm due by the
// wall clock that is not due by this one, which it would poll for without pause; after a jump
// forward, Harness.Wake makes it look at once.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NowMS reads the clock in Unix milliseconds.
func (c *Clock) NowMS() int64 { return c.Now().UnixMilli() }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// SetMS moves the clock to Unix millisecond ms.
func (c *Clock) SetMS(ms int64) { c.Set(time.UnixMilli(ms)) }

// Sleep advances the clock by d at once and records the wait; it fails only when ctx is done
// already.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	return nil
}

// Waits lists the waits of Sleep, in order.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}
