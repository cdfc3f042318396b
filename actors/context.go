package actors

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// Context is a handler's view of its actor during one message: identity, the partition's
// clock, a storage transaction, and the effects the message requests (see Effect). It is valid
// only during the call it was passed to.
//
// Reads see, in order of precedence, this message's own writes, writes of earlier messages
// not yet committed, and committed state. Writes become visible to later messages at once
// and durable when the Raft command carrying them commits.
type Context struct {
	act    *activation
	now    int64
	writes []write         // this message's writes, in order, one per key
	index  map[string]int  // relative key → position in writes, once writes outgrows a scan
	alarms map[string]bool // alarm names this message set
	// effects this message requested, started after its commit unless it is rolled back
	effects []*effect
}

type write struct {
	key, value []byte
	deleted    bool
}

// KV is one entry returned by List.
type KV struct {
	Key, Value []byte
}

// ListOptions selects a range of an actor's keys. Start and End bound the range [Start, End);
// Prefix, when set, further confines it to keys beginning with Prefix. Limit ≤ 0 means no limit.
type ListOptions struct {
	Prefix     []byte
	Start, End []byte
	Limit      int
	Reverse    bool
}

// ID is the actor's id.
func (c *Context) ID() string { return c.act.id }

// Kind is the actor's kind name.
func (c *Context) Kind() string { return c.act.kind.Name }

// Now is the partition's clock for this message: the leader's wall clock, never behind any
// time already committed in the partition. Expiry decisions must use it; it is recorded in
// the Raft command that carries this message's writes.
func (c *Context) Now() time.Time { return time.UnixMilli(c.now) }

// Get reads one key.
func (c *Context) Get(key []byte) ([]byte, bool, error) {
	return c.get(c.dataKey(key))
}

// Put writes one key. The value is copied.
func (c *Context) Put(key, value []byte) {
	c.set(c.dataKey(key), append([]byte(nil), value...), false)
}

// Delete removes one key.
func (c *Context) Delete(key []byte) { c.set(c.dataKey(key), nil, true) }

// List returns the actor's keys in the range, in order (descending when Reverse).
func (c *Context) List(o ListOptions) ([]KV, error) {
	base := c.act.dataPrefix
	lo := append(append([]byte(nil), base...), o.Start...)
	var hi []byte
	if o.End != nil {
		hi = append(append([]byte(nil), base...), o.End...)
	} else {
		hi = persistence.PrefixEnd(base)
	}
	if o.Prefix != nil {
		plo := append(append([]byte(nil), base...), o.Prefix...)
		if bytes.Compare(plo, lo) > 0 {
			lo = plo
		}
		if phi := persistence.PrefixEnd(plo); phi != nil && bytes.Compare(phi, hi) < 0 {
			hi = phi
		}
	}
	var out []KV
	if bytes.Compare(lo, hi) >= 0 {
		return out, nil
	}
	err := c.scan(lo, hi, o.Reverse, func(k, v []byte) bool {
		out = append(out, KV{Key: k[len(base):], Value: v})
		return o.Limit <= 0 || len(out) < o.Limit
	})
	return out, err
}

// SetAlarm schedules (or moves) the named alarm to fire at t. An actor may hold any number
// of alarms; each fires at least once, after t, even across restarts and failover.
func (c *Context) SetAlarm(name string, t time.Time) error {
	if err := c.DeleteAlarm(name); err != nil {
		return err
	}
	at := t.UnixMilli()
	a := c.act
	c.set(c.alarmKey(name), alarmRecord{due: at, scheduled: at}.encode(), false)
	c.set(indexKey(at, a.kind.Name, a.id, name), []byte{}, false)
	if c.alarms == nil {
		c.alarms = map[string]bool{}
	}
	c.alarms[name] = true
	return nil
}

// DeleteAlarm cancels the named alarm (and forgets it if it was parked). Deleting an alarm
// that does not exist is not an error.
func (c *Context) DeleteAlarm(name string) error {
	rec, ok, err := c.alarm(name)
	if err != nil {
		return err
	}
	a := c.act
	if ok {
		c.set(c.alarmKey(name), nil, true)
		c.set(indexKey(rec.due, a.kind.Name, a.id, name), nil, true)
	}
	c.set(append(actorPrefix(secParked, a.kind.Name, a.id), name...), nil, true)
	return nil
}

// Alarms lists the actor's pending alarms in name order.
func (c *Context) Alarms() ([]Alarm, error) {
	base := actorPrefix(secAlarm, c.act.kind.Name, c.act.id)
	var out []Alarm
	var bad error
	err := c.scan(base, persistence.PrefixEnd(base), false, func(k, v []byte) bool {
		rec, err := decodeAlarmRecord(v)
		if err != nil {
			bad = err
			return false
		}
		out = append(out, rec.alarm(string(k[len(base):])))
		return true
	})
	if err == nil {
		err = bad
	}
	return out, err
}

func (r alarmRecord) alarm(name string) Alarm {
	return Alarm{Name: name, Scheduled: time.UnixMilli(r.scheduled), Due: time.UnixMilli(r.due), Attempt: r.attempt}
}

func (c *Context) alarmKey(name string) []byte {
	return append(actorPrefix(secAlarm, c.act.kind.Name, c.act.id), name...)
}

func (c *Context) alarm(name string) (alarmRecord, bool, error) {
	v, ok, err := c.get(c.alarmKey(name))
	if err != nil || !ok {
		return alarmRecord{}, false, err
	}
	rec, err := decodeAlarmRecord(v)
	return rec, err == nil, err
}

func (c *Context) dataKey(key []byte) []byte {
	return append(append(make([]byte, 0, len(c.act.dataPrefix)+len(key)), c.act.dataPrefix...), key...)
}

// scanWrites is the number of writes at which a message's lookups stop scanning them and an
// index is built: most messages write a few keys, and a map per message was a tenth of the
// bytes a request allocated.
const scanWrites = 16

// written returns the position of key's write in c.writes, if this message wrote it.
func (c *Context) written(key []byte) (int, bool) {
	if c.index != nil {
		i, ok := c.index[string(key)]
		return i, ok
	}
	for i := range c.writes {
		if bytes.Equal(c.writes[i].key, key) {
			return i, true
		}
	}
	return 0, false
}

func (c *Context) set(key, value []byte, deleted bool) {
	if i, ok := c.written(key); ok {
		c.writes[i] = write{key: key, value: value, deleted: deleted}
		return
	}
	c.writes = append(c.writes, write{key: key, value: value, deleted: deleted})
	switch n := len(c.writes); {
	case n == scanWrites:
		c.index = make(map[string]int, 2*n)
		for i, w := range c.writes {
			c.index[string(w.key)] = i
		}
	case n > scanWrites:
		c.index[string(key)] = n - 1
	}
}

// rollback discards this message's writes and the effects it requested.
func (c *Context) rollback() { c.writes, c.index, c.alarms, c.effects = nil, nil, nil, nil }

func (c *Context) get(key []byte) ([]byte, bool, error) {
	if i, ok := c.written(key); ok {
		w := c.writes[i]
		return w.value, !w.deleted, nil
	}
	if v, deleted, ok := c.act.gate.read(key); ok {
		return v, !deleted, nil
	}
	v, ok, err := c.act.rt.store.Get(c.act.part.id, key)
	if err != nil {
		return nil, false, fmt.Errorf("read %s/%s: %w", c.act.kind.Name, c.act.id, err)
	}
	return v, ok, nil
}

// scan merges this message's writes and the activation's uncommitted writes over committed
// state for relative keys in [lo, hi). fn's slices stay valid after the call.
func (c *Context) scan(lo, hi []byte, reverse bool, fn func(k, v []byte) bool) error {
	// Uncommitted entries in range, newest layer winning, sorted in scan order.
	pending := map[string]write{}
	for k, e := range c.act.gate.overlay {
		if k >= string(lo) && k < string(hi) {
			pending[k] = write{key: []byte(k), value: e.value, deleted: e.deleted}
		}
	}
	for _, w := range c.writes {
		if bytes.Compare(w.key, lo) >= 0 && bytes.Compare(w.key, hi) < 0 {
			pending[string(w.key)] = w
		}
	}
	keys := make([]string, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if reverse {
		for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
			keys[i], keys[j] = keys[j], keys[i]
		}
	}
	before := func(a, b string) bool {
		if reverse {
			return a > b
		}
		return a < b
	}

	stopped := false
	// emit passes pending entries that sort before k (all of them when k is nil).
	emit := func(k []byte) bool {
		for len(keys) > 0 && (k == nil || before(keys[0], string(k))) {
			w := pending[keys[0]]
			keys = keys[1:]
			if !w.deleted && !fn(w.key, w.value) {
				return false
			}
		}
		return true
	}
	err := c.act.rt.store.Scan(c.act.part.id, lo, hi, reverse, func(k, v []byte) bool {
		if !emit(k) {
			stopped = true
			return false
		}
		if len(keys) > 0 && keys[0] == string(k) {
			return true // shadowed by an uncommitted write, emitted in its turn below
		}
		if !fn(append([]byte(nil), k...), append([]byte(nil), v...)) {
			stopped = true
			return false
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("list %s/%s: %w", c.act.kind.Name, c.act.id, err)
	}
	if !stopped {
		emit(nil)
	}
	return nil
}
