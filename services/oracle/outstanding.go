package oracle

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"

	"github.com/shardkeeper/shardkeeper/actors"
)

// # Counting outstanding nonces
//
// A shard bounds each organisation's counted, unused nonces it holds (its outstanding nonces,
// C below) at perShard. It keeps C in memory, and in storage only a mark that C never
// exceeds, so that an issue and a consume write nothing for the count in the steady state:
// two more keys per issue and consume (an exact stored count) cost more than 10% of the
// oracle's throughput.
//
// An activation counts in an epoch, a random number (counts.epoch) that every nonce it
// counts stores in its record until consumed (record.Counted); a new epoch begins with each
// activation, and whenever the memory is lost (a message's writes rolled back, or too many
// organisations). For each organisation the epoch keeps (count):
//
//   - own: its nonces counted in this epoch, unused and not removed — exact;
//   - old: its nonces counted in earlier epochs, unused and not removed — an upper bound,
//     the stored mark when the epoch first touched the organisation, less the ones consumed
//     or removed since; exact (0) once every nonce stored when the epoch began is removed
//     (counts.past: the removal index has no entry left at or before counts.z);
//   - mark: the stored o/<org_id> (an actors.Counter, absent at 0).
//
// Invariant, after every committed message: C ≤ mark. An issue that takes own + old past
// the mark raises it to own + old + slack (at most perShard), so an organisation growing by
// one nonce at a time writes its mark once per slack issues, and one issuing and consuming
// writes it once per epoch. Consumes never write it. When the gc alarm removes a nonce of an
// organisation whose count is exact (old is 0), it lowers a mark above count + 2 slack to
// count + slack, and deletes it at a count of 0 once the last nonce the epoch counted for the
// organisation is due (an organisation issuing and consuming keeps it). The epoch's first
// firing after counts.past deletes the marks of the organisations it counts nothing of.
//
// So a shard refuses an organisation when own + old reaches perShard: exactly at the bound
// within an epoch; after a new epoch, early by the mark's excess over the count — at most
// 2 slack after the gc last lowered it, more when the organisation consumed much since —
// until the nonces stored before are collected (TTL and retention later). It errs toward
// counting, never past the bound.
//
// The gc alarm reads the record of every nonce it removes (with a bound set), to release the
// unused ones and tidy their organisations' marks: a point read per nonce, off the request
// path.

// maxCountedOrgs bounds the organisations one epoch keeps counts of (about 100 bytes each).
// Past it, the epoch forgets those with own at 0: read again, their old is their mark (0
// once counts.past), still an upper bound. When that frees less than half, the epoch ends
// after the message, and the next one starts from the marks.
const maxCountedOrgs = 4096

// count is an organisation's count in the current epoch.
type count struct {
	own  int   // counted in this epoch, unused, not removed: exact
	old  int   // counted earlier, unused, not removed: at most this (exact when 0)
	mark int   // the stored o/<org_id>
	last int64 // latest remove_at of a nonce counted in this epoch (0: none)
}

// counts is a shard's memory of its organisations' counts (see above); the zero value has
// no epoch, and begin starts one.
type counts struct {
	epoch int64
	z     int64 // latest remove_at stored when the epoch began
	past  bool  // no nonce stored when the epoch began is left: old is 0 for every organisation
	swept bool  // since past, the marks of the organisations the epoch holds nothing of are gone
	orgs  map[string]*count
	end   bool // end the epoch after this message
}

// outstanding is the stored mark of org.
func outstanding(org string) actors.Counter {
	return actors.Counter{Key: append(append(make([]byte, 0, len(prefixOrg)+len(org)), prefixOrg...), org...)}
}

// slack is how far above the count an issue raises the mark.
func (s *shard) slack() int { return max(s.perShard/16, 1) }

// begin starts an epoch unless one is under way.
func (s *shard) begin(ctx *actors.Context) error {
	if s.counts.epoch != 0 {
		return nil
	}
	kvs, err := ctx.List(actors.ListOptions{Prefix: removeIndex.Prefix, Limit: 1, Reverse: true})
	if err != nil {
		return err
	}
	// 32 random bits: another epoch whose nonces are still stored has the same number about
	// once in 4·10^9 new epochs.
	c := counts{epoch: int64(mrand.Uint32N(1<<32-1)) + 1, past: true, orgs: map[string]*count{}}
	if len(kvs) > 0 {
		if c.z, _, err = removeIndex.Parse(kvs[0].Key); err != nil {
			return fmt.Errorf("nonce oracle %s: %w", ctx.ID(), err)
		}
		c.past = false
	}
	s.counts = c
	return nil
}

// count returns org's count, reading its mark on the epoch's first need.
func (s *shard) count(ctx *actors.Context, org string) (*count, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if c, ok := s.counts.orgs[org]; ok {
		return c, nil
	}
	mark, err := outstanding(org).Get(ctx)
	if err != nil {
		return nil, err
	}
	c := &count{mark: mark}
	if !s.counts.past {
		c.old = mark
	}
	if len(s.counts.orgs) >= maxCountedOrgs {
		for other, oc := range s.counts.orgs {
			if oc.own == 0 {
				delete(s.counts.orgs, other)
			}
		}
		s.counts.end = len(s.counts.orgs) >= maxCountedOrgs/2
	}
	s.counts.orgs[org] = c
	return c, nil
}

// admit counts a new nonce of org removed at removeAt, or refuses it: too_many_outstanding
// when the organisation holds perShard here already (nothing written).
func (s *shard) admit(ctx *actors.Context, org string, removeAt int64) error {
	c, err := s.count(ctx, org)
	if err != nil {
		return err
	}
	if n := c.own + c.old; n >= s.perShard {
		return s.full(ctx, n)
	}
	c.own++
	c.last = max(c.last, removeAt)
	if n := c.own + c.old; n > c.mark {
		c.mark = min(n+s.slack(), s.perShard)
		outstanding(org).Set(ctx, c.mark)
	}
	return nil
}

// release uncounts a nonce of org counted in epoch, consumed or removed unused.
func (s *shard) release(ctx *actors.Context, org string, epoch int64) error {
	c, err := s.count(ctx, org)
	if err != nil {
		return err
	}
	if epoch == s.counts.epoch {
		c.own = max(c.own-1, 0)
	} else {
		c.old = max(c.old-1, 0)
	}
	return nil
}

// removing takes the removal of a nonce by the gc alarm: a counted one is released unless
// its consume did, and its organisation noted in touched.
func (s *shard) removing(ctx *actors.Context, nonce string, touched map[string]*count) error {
	v, found, err := ctx.Get(nonceKey(nonce))
	if err != nil || !found {
		return err
	}
	var rec record
	if err := json.Unmarshal(v, &rec); err != nil {
		return fmt.Errorf("nonce oracle %s: record of %q: %w", ctx.ID(), nonce, err)
	}
	if rec.Counted == 0 && rec.UsedAt == 0 {
		return nil // never counted
	}
	c, err := s.count(ctx, rec.OrgID)
	if err != nil {
		return err
	}
	touched[rec.OrgID] = c
	if rec.UsedAt != 0 {
		return nil // its consume released it
	}
	return s.release(ctx, rec.OrgID, rec.Counted)
}

// tidy lowers or deletes the marks of the organisations a gc firing touched, and once the
// nonces stored when the epoch began are all removed (firstLeft: remove_at of the earliest
// nonce left, or -1), the marks of every organisation the epoch holds nothing of.
func (s *shard) tidy(ctx *actors.Context, touched map[string]*count, firstLeft, now int64) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if !s.counts.past && (firstLeft < 0 || firstLeft > s.counts.z) {
		s.counts.past = true
		for _, c := range s.counts.orgs {
			c.old = 0
		}
	}
	if s.counts.past && !s.counts.swept {
		s.counts.swept = true
		kvs, err := ctx.List(actors.ListOptions{Prefix: prefixOrg})
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			org := string(kv.Key[len(prefixOrg):])
			if c, ok := s.counts.orgs[org]; !ok {
				ctx.Delete(kv.Key) // nothing counted in this epoch, and nothing earlier left
			} else if _, seen := touched[org]; !seen {
				touched[org] = c
			}
		}
	}
	if s.perShard == 0 {
		return nil
	}
	slack := s.slack()
	for org, c := range touched {
		switch n := c.own; {
		case c.old > 0: // not exact
		case n == 0 && now >= c.last && c.mark > 0:
			c.mark = 0
			outstanding(org).Set(ctx, 0)
		case c.mark > n+2*slack:
			c.mark = n + slack
			outstanding(org).Set(ctx, c.mark)
		}
	}
	return nil
}

// settle ends the epoch after a message when its counts may no longer match storage: the
// message's writes were rolled back (rolledBack), or the epoch holds too many organisations.
func (s *shard) settle(rolledBack bool) {
	if rolledBack || s.counts.end {
		s.counts = counts{}
	}
}
