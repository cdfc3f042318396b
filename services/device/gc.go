package device

import (
	"fmt"

	"github.com/shardkeeper/shardkeeper/actors"
)

// Garbage collection: the gc alarm removes expired nonces and devices unseen past their
// TTL, a batch at a time, and is kept due no later than the earliest expiry.

// Alarm runs the gc alarm: it deletes up to gcBatch due entries — nonces past their
// retention first, then devices not seen for DeviceTTL — and re-arms for the next collection
// time (for now when due entries remain). With nothing left it lets the alarm go.
func (r *registry) Alarm(ctx *actors.Context, a actors.Alarm) error {
	if a.Name != GCAlarm {
		return nil // not ours: nothing to do, and returning nil drops it
	}
	// Until this firing succeeds, the runtime decides what becomes of the alarm.
	r.gc.Forget()
	now := ctx.Now().UnixMilli()
	nonces, err := r.collectNonces(ctx, now, gcBatch)
	if err != nil {
		return err
	}
	devices := 0
	if nonces < gcBatch {
		if devices, err = r.collectDevices(ctx, now, gcBatch-nonces); err != nil {
			return err
		}
		if devices > 0 {
			n, err := count.Get(ctx)
			if err != nil {
				return err
			}
			count.Set(ctx, n-devices)
		}
	}
	next, ok := now, true // maybe more due: continue at once
	if nonces+devices < gcBatch {
		if next, ok, err = r.nextExpiry(ctx); err != nil {
			return err
		}
	}
	if !ok {
		r.gc.Dropped() // returning nil without setting it again drops the alarm
		return nil
	}
	return r.gc.Set(ctx, next)
}

// nextExpiry is the earliest collection time of any stored nonce or device.
func (r *registry) nextExpiry(ctx *actors.Context) (int64, bool, error) {
	next, ok := int64(0), false
	for _, p := range []struct {
		index actors.TimeIndex
		ttl   int64
	}{{expIndex, r.nonceTTL()}, {seenIndex, r.deviceTTL()}} {
		t, _, found, err := p.index.First(ctx, nil)
		if err != nil {
			return 0, false, err
		}
		if !found {
			continue
		}
		if t += p.ttl; !ok || t < next {
			next, ok = t, true
		}
	}
	return next, ok, nil
}

// collectNonces deletes up to limit nonces past their retention, earliest first, with their
// index entries, and returns how many it deleted.
func (r *registry) collectNonces(ctx *actors.Context, now int64, limit int) (int, error) {
	// Past retention means expires_at + ttl <= now, i.e. expires_at < now - ttl + 1.
	kvs, err := expIndex.Before(ctx, now-r.nonceTTL()+1, nil, limit)
	if err != nil {
		return 0, err
	}
	unused := map[string]int{} // device → its unused nonces deleted here
	for _, kv := range kvs {
		exp, nonce, err := expIndex.Parse(kv.Key)
		if err != nil {
			return 0, err
		}
		nr, err := decodeNonceRecord(kv.Value)
		if err != nil {
			return 0, fmt.Errorf("device registry %s: index entry of nonce %q: %w", ctx.ID(), nonce, err)
		}
		ctx.Delete(kv.Key)
		ctx.Delete(nonceKey(nonce))
		if !nr.Used {
			pendIndex(nr.DeviceID).Delete(ctx, exp, nonce)
			unused[nr.DeviceID]++
		}
	}
	for id, k := range unused {
		dev, found, err := r.device(ctx, id)
		if err != nil {
			return 0, err
		}
		if !found {
			return 0, fmt.Errorf("device registry %s: unused nonces of device %q, which has no record", ctx.ID(), id)
		}
		dev.Pending -= k
		if err := r.put(ctx, id, dev); err != nil {
			return 0, err
		}
	}
	return len(kvs), nil
}

// collectDevices deletes up to limit expired devices, oldest first, and returns how many it
// deleted. The caller owns meta/count.
func (r *registry) collectDevices(ctx *actors.Context, now int64, limit int) (int, error) {
	// Expired means last_seen + ttl <= now, i.e. last_seen < now - ttl + 1.
	kvs, err := seenIndex.Before(ctx, now-r.deviceTTL()+1, nil, limit)
	if err != nil {
		return 0, err
	}
	for _, kv := range kvs {
		seen, id, err := seenIndex.Parse(kv.Key)
		if err != nil {
			return 0, err
		}
		if err := r.remove(ctx, id, seen); err != nil {
			return 0, err
		}
	}
	return len(kvs), nil
}

// removeCounted removes a device and decrements meta/count.
func (r *registry) removeCounted(ctx *actors.Context, id string, lastSeen int64) error {
	n, err := count.Get(ctx)
	if err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("device registry %s: meta/count is %d with device %q stored", ctx.ID(), n, id)
	}
	if err := r.remove(ctx, id, lastSeen); err != nil {
		return err
	}
	count.Set(ctx, n-1)
	return nil
}

// remove deletes a device's record, its seen/ entry and its unused nonces (record, exp/ and
// pend/ entries); used nonces stay as replay markers until they expire. The caller owns
// meta/count.
func (r *registry) remove(ctx *actors.Context, id string, lastSeen int64) error {
	ctx.Delete(devKey(id))
	seenIndex.Delete(ctx, lastSeen, id)
	pend := pendIndex(id)
	kvs, err := ctx.List(actors.ListOptions{Prefix: pend.Prefix})
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		exp, nonce, err := pend.Parse(kv.Key)
		if err != nil {
			return err
		}
		ctx.Delete(kv.Key)
		ctx.Delete(nonceKey(nonce))
		expIndex.Delete(ctx, exp, nonce)
	}
	return nil
}
