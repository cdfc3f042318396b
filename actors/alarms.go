package actors

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// Alarm delivery. Alarms live in storage (see keys.go): a record per (actor, name) and an
// entry in the partition's time index. The partition's leader runs one scheduler that reads
// the index, sends each due alarm to its actor, and waits for the firing to commit. A firing
// that succeeds deletes the alarm in the same command as the handler's writes; one that fails
// is moved later in the index with exponential backoff, and after MaxAlarmRetries failed
// retries it is parked. Because the index is durable and only a committed firing removes an
// entry, every alarm fires at least once across crashes and failover.

func (a *activation) handleAlarm(m *alarmFire) {
	if err := a.usable(); err != nil {
		m.done(err)
		return
	}
	ctx := a.newContext()
	name := m.entry.name
	rec, ok, err := ctx.alarm(name)
	if err != nil || !ok || rec.due != m.entry.due {
		// Deleted or moved since the scheduler read the index (possibly by a write not yet
		// committed): the new state decides.
		a.stage(ctx, func(cerr error) { m.done(errors.Join(err, cerr)) })
		return
	}
	met := a.rt.metrics
	met.alarmsFired.WithLabelValues(a.kind.Name).Inc()
	met.alarmLateness.WithLabelValues(a.kind.Name).Observe(float64(ctx.now-rec.scheduled) / 1000)

	h, ok := a.handler.(AlarmHandler)
	var herr error
	if !ok {
		herr = fmt.Errorf("kind %s does not handle alarms", a.kind.Name)
	} else {
		_, herr = a.invoke(func() ([]byte, error) { return nil, h.Alarm(ctx, rec.alarm(name)) })
	}
	idx := indexKey(rec.due, a.kind.Name, a.id, name)
	switch {
	case herr == nil:
		if !ctx.alarms[name] { // not set again by the handler
			ctx.set(ctx.alarmKey(name), nil, true)
			ctx.set(idx, nil, true)
		}
	case rec.attempt >= a.rt.opts.MaxAlarmRetries:
		ctx.rollback()
		ctx.set(ctx.alarmKey(name), nil, true)
		ctx.set(idx, nil, true)
		rec.attempt++
		ctx.set(append(actorPrefix(secParked, a.kind.Name, a.id), name...), rec.encode(), false)
		met.alarmsParked.WithLabelValues(a.kind.Name).Inc()
		a.rt.logger.Error("alarm parked after repeated failures", "kind", a.kind.Name, "id", a.id,
			"alarm", name, "attempts", rec.attempt, "error", herr)
	default:
		ctx.rollback()
		backoff := a.rt.opts.AlarmBackoff << rec.attempt
		rec.attempt++
		rec.due = ctx.now + backoff.Milliseconds()
		ctx.set(idx, nil, true)
		ctx.set(ctx.alarmKey(name), rec.encode(), false)
		ctx.set(indexKey(rec.due, a.kind.Name, a.id, name), []byte{}, false)
		met.alarmsRetried.WithLabelValues(a.kind.Name).Inc()
		a.rt.logger.Warn("alarm failed; retrying", "kind", a.kind.Name, "id", a.id, "alarm", name,
			"attempt", rec.attempt, "retry_in", backoff, "error", herr)
	}
	a.stage(ctx, m.done)
}

// scheduler fires a partition's due alarms while this node leads it.
type scheduler struct {
	rt   *Runtime
	part *partition
	poke chan struct{}
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	inflight map[string]bool // index keys sent and not yet finished
}

func newScheduler(rt *Runtime, part *partition) *scheduler {
	return &scheduler{rt: rt, part: part, poke: make(chan struct{}, 1), stop: make(chan struct{}),
		done: make(chan struct{}), inflight: map[string]bool{}}
}

// wake makes the scheduler re-read the index (an alarm was committed).
func (s *scheduler) wake() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

func (s *scheduler) close() {
	close(s.stop)
	<-s.done
}

const alarmScanLimit = 1024

func (s *scheduler) run() {
	defer close(s.done)
	for {
		next, sent, err := s.fireDue()
		if err != nil {
			s.rt.logger.Error("alarm scan failed", "partition", s.part.id, "error", err)
			next = s.rt.opts.Clock().Add(time.Second).UnixMilli()
		}
		wait := time.Until(time.UnixMilli(next))
		if sent > 0 || wait < 0 {
			// More may be due beyond the scan limit, or firings are in flight: look again
			// soon, without spinning on entries already in flight.
			wait = min(max(wait, 0), 50*time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-s.poke:
		case <-t.C:
		}
		t.Stop()
	}
}

// fireDue sends every due alarm not already in flight to its actor. It returns when the next
// not-yet-due alarm is due (far future if none) and how many due alarms are sent or in flight.
func (s *scheduler) fireDue() (next int64, sent int, err error) {
	now := s.rt.opts.Clock().UnixMilli()
	next = now + int64(time.Hour/time.Millisecond)
	var due []indexEntry
	var keys [][]byte
	err = s.rt.store.Scan(s.part.id, indexBound(0), persistence.PrefixEnd([]byte{secIndex}), false,
		func(k, _ []byte) bool {
			e, perr := parseIndexKey(k)
			if perr != nil {
				s.rt.logger.Error("bad alarm index key", "partition", s.part.id, "error", perr)
				return true
			}
			if e.due > now {
				next = e.due
				return false
			}
			due = append(due, e)
			keys = append(keys, append([]byte(nil), k...))
			return len(due) < alarmScanLimit
		})
	if err != nil {
		return next, 0, fmt.Errorf("scan alarm index of partition %d: %w", s.part.id, err)
	}
	for i, e := range due {
		key := string(keys[i])
		s.mu.Lock()
		busy := s.inflight[key]
		s.inflight[key] = true
		s.mu.Unlock()
		kind, known := s.rt.kinds[e.kind]
		if !known {
			if !busy {
				s.rt.logger.Error("alarm of unregistered kind; left in place", "kind", e.kind, "id", e.id, "alarm", e.name)
			}
			continue // stays marked in flight, so it is not retried until the next leadership
		}
		sent++
		if busy {
			continue
		}
		// On error the entry is still due and the next scan (at most 50 ms away while
		// anything is due) sends it again.
		msg := &alarmFire{entry: e, done: func(error) {
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
		}}
		if wait, derr := s.part.deliver(kind, e.id, msg); wait != nil || derr != nil {
			msg.done(nil) // the partition is not led here any more; the scheduler is stopping
		}
	}
	return next, sent, nil
}
