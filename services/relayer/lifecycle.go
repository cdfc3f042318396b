package relayer

import (
	"maps"

	"github.com/shardkeeper/shardkeeper/actors"
)

// The key actor's life: reconciling its outbox when it activates, the poll alarm that
// drives it, and collecting terminal records past their retention.

// Activate implements actors.Activator: reconcile every in-flight transaction before new work
// — re-send its identical bytes, in nonce order, and ask for its status, whose answer ends it,
// proves it dead or leaves it to the next poll — and keep the poll alarm set while anything is
// in flight. Nothing is ever signed again here: what the previous activation sent may land.
func (a *keyActor) Activate(ctx *actors.Context) error {
	a.begin()
	if a.idErr != nil {
		return nil
	}
	err := a.reconcile(ctx)
	a.end(err)
	return err
}

func (a *keyActor) reconcile(ctx *actors.Context) error {
	flights, err := ctx.List(actors.ListOptions{Prefix: prefixFlight})
	if err != nil {
		return err
	}
	if len(flights) > 0 {
		a.request(ctx, effectBlock, a.fetchBlock)
	}
	// Re-send first, in nonce order (f/ keys sort by nonce), so that the sends of this
	// activation keep the key's order; re-sending what may have landed is harmless.
	landed := 0
	for _, kv := range flights {
		r, ok, err := loadRecord(ctx, string(kv.Value))
		if err != nil {
			return err
		}
		if ok && r.Landed {
			landed++
		}
		if ok && !r.terminal() && r.Nonce != nil {
			if a.send(ctx, r) {
				a.met.resent()
			}
			a.query(ctx, r)
		}
	}
	// The counts are kept by every message that changes f/; a new activation checks them
	// against the index it just read (they only drive the pipeline's bound and the status).
	for _, c := range []struct {
		counter actors.Counter
		want    int
	}{{flightCount, len(flights)}, {landedCount, landed}} {
		if n, err := c.counter.Get(ctx); err != nil {
			return err
		} else if n != c.want {
			c.counter.Set(ctx, c.want)
		}
	}
	if err := a.resumeMoves(ctx); err != nil {
		return err
	}
	return a.driveAndArm(ctx)
}

// Deactivate implements actors.Deactivator: the key's connection and gauges go with its
// activation.
func (a *keyActor) Deactivate() {
	go a.sender.Close() // it may wait for a write or a dial under way: not on the mailbox
	a.met.drop()
}

// Alarm implements actors.AlarmHandler.
func (a *keyActor) Alarm(ctx *actors.Context, al actors.Alarm) error {
	a.begin()
	var err error
	switch al.Name {
	case a.poll.Name:
		err = a.tick(ctx)
	case a.gc.Name:
		err = a.collect(ctx)
	}
	a.end(err)
	return err
}

// tick is a poll: refresh the block, ask for the hash of every in-flight transaction not
// already being asked about or sent, then drive the queue.
func (a *keyActor) tick(ctx *actors.Context) error {
	a.poll.Forget()
	if a.idErr != nil {
		return nil
	}
	flights, err := ctx.List(actors.ListOptions{Prefix: prefixFlight, Start: flightKey(a.flightLow)})
	if err != nil {
		return err
	}
	if len(flights) > 0 {
		a.flightLow = keyNumber(flights[0].Key) // later ones are signed with larger nonces
	}
	a.request(ctx, effectBlock, a.fetchBlock)
	now := ctx.Now().UnixMilli()
	// Re-send, in nonce order, the transactions found unknown and alive. Each is held again
	// (see gate): nothing later goes before the node took it.
	resend := maps.Clone(a.resend)
	clear(a.resend)
	for _, kv := range flights { // in nonce order
		r, ok, err := loadRecord(ctx, string(kv.Value))
		if err != nil {
			return err
		}
		if !ok || r.terminal() || r.Nonce == nil {
			continue
		}
		if resend[*r.Nonce] && a.send(ctx, r) {
			a.met.resent()
			r.SentAt = now
			if err := putJSON(ctx, intentKey(r.IdempotencyKey), r); err != nil {
				return err
			}
		}
		if !a.busy[effectSend+nonceName(*r.Nonce)] {
			a.query(ctx, r)
		}
	}
	if err := a.resumeMoves(ctx); err != nil {
		return err
	}
	work, err := a.drive(ctx)
	if err != nil {
		return err
	}
	if work {
		// Set, not Arm: the firing alarm still reads as pending, and the runtime deletes it
		// after this firing unless it is set again.
		return a.poll.Set(ctx, ctx.Now().Add(a.pollEvery()).UnixMilli())
	}
	a.poll.Dropped()
	return nil
}

// collect removes the terminal records whose retention ended.
func (a *keyActor) collect(ctx *actors.Context) error {
	a.gc.Forget()
	now := ctx.Now().UnixMilli()
	const batch = 256
	due, err := retention.Before(ctx, now+1, nil, batch)
	if err != nil {
		return err
	}
	for _, kv := range due {
		t, idem, err := retention.Parse(kv.Key)
		if err != nil {
			return err
		}
		ctx.Delete(intentKey(idem))
		retention.Delete(ctx, t, idem)
		if a.cfg.Caller != nil {
			ctx.Put(forgetKey(idem), []byte{})
		}
	}
	if err := a.forgetIndexed(ctx); err != nil {
		return err
	}
	if len(due) == batch {
		return a.gc.Set(ctx, now)
	}
	t, _, ok, err := retention.First(ctx, nil)
	if err != nil {
		return err
	}
	if !ok {
		a.gc.Dropped()
		return nil
	}
	return a.gc.Set(ctx, t)
}
