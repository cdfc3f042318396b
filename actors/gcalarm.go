package actors

import (
	"errors"
	"time"
)

// GCAlarm keeps an actor's garbage-collection alarm pending, due no later than the earliest
// time something it stores must be collected. It caches when the alarm is due, so that arming
// it — on every message that stores something with an expiry — reads the actor's alarms once
// per activation rather than once per message.
//
// The cache must only ever hold what storage holds. The runtime discards the whole handler
// after a failed commit; the handler tells the GCAlarm about the two other ways its writes can
// vanish: a message whose writes are rolled back (Observe) and an alarm firing, which the
// runtime may move or delete whatever the handler did (Forget at its start).
type GCAlarm struct {
	Name string // the alarm's name

	known   bool  // the fields below reflect storage
	pending bool  // the alarm is pending
	due     int64 // when it is due (Unix ms), if pending
}

// Arm makes sure the alarm is pending and due no later than t (Unix ms).
func (g *GCAlarm) Arm(ctx *Context, t int64) error {
	if !g.known {
		alarms, err := ctx.Alarms()
		if err != nil {
			return err
		}
		g.known, g.pending = true, false
		for _, a := range alarms {
			if a.Name == g.Name {
				g.pending, g.due = true, a.Due.UnixMilli()
			}
		}
	}
	if g.pending && g.due <= t {
		return nil
	}
	return g.Set(ctx, t)
}

// Set sets the alarm for t (Unix ms), earlier or later than it was.
func (g *GCAlarm) Set(ctx *Context, t int64) error {
	if err := ctx.SetAlarm(g.Name, time.UnixMilli(t)); err != nil {
		g.known = false
		return err
	}
	g.known, g.pending, g.due = true, true, t
	return nil
}

// Forget drops the cache: the alarm's state is unknown until read again.
func (g *GCAlarm) Forget() { g.known = false }

// Dropped records that the alarm is not pending: its firing succeeded without setting it
// again, so the runtime deletes it.
func (g *GCAlarm) Dropped() { g.known, g.pending = true, false }

// Observe takes the outcome of a message: an error other than a domain outcome
// (*Error) rolls back the message's writes, the alarm's included.
func (g *GCAlarm) Observe(err error) {
	var outcome *Error
	if err != nil && !errors.As(err, &outcome) {
		g.Forget()
	}
}
