// Package servers is the server registry kind (seed: Cloudflare ServerRegistryDO): one actor
// per registry name holds the servers that announced themselves with a heartbeat. An entry is
// live while it was seen within Config.TTL; a registry holds at most Config.MaxServers live
// entries. Expiry is decided when reading (with the partition clock, ctx.Now); deleting expired
// entries is only garbage collection, done by the "gc" alarm and, when the registry is full,
// inline before a registration is refused. No outcome depends on whether collection has run.
//
// # Storage layout
//
// User keys of one registry actor:
//
//	srv/<server_id>                      record (JSON): address, region, meta, registered_at, last_seen
//	seen/<last_seen u64 BE><server_id>   empty; the expiry index, oldest last_seen first
//	                                     (an actors.TimeIndex)
//	meta/count                           u64 BE: how many srv/ records are stored (absent when 0;
//	                                     an actors.Counter)
//
// Invariants, after every committed message:
//   - every srv/ record has exactly one seen/ entry, carrying its last_seen, and vice versa;
//   - meta/count equals the number of srv/ records (so counting is O(1));
//   - while meta/count > 0 the "gc" alarm is pending, due no later than the earliest expiry
//     (the smallest last_seen + TTL). A heartbeat only moves an expiry later and a new entry
//     expires after every existing one, so only a registration into an empty registry and the
//     alarm itself ever set it;
//   - a registry whose entries have all been collected holds no keys at all.
//
// # Methods
//
// MethodRegister (body Registration, reply Registered), MethodList (no body, reply List),
// MethodDelete (body Deletion, empty reply). Domain outcomes are *actors.Error with the codes
// invalid_request, invalid_id, registry_full (with RetryAfter) and unknown_server.
package servers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
)

// KindName is the actor kind's name.
const KindName = "server-registry"

// Config holds the service's settings (see Settings): the kind's limits, both positive (the
// settings' checks ensure it), and the token file of the registry's writes, which only the
// HTTP routes read.
type Config struct {
	TTL        time.Duration // --server-ttl: entries not seen for this long are not live
	MaxServers int           // --max-servers: live entries per registry
	TokenFile  string        // --servers-token-file: "" leaves writes open

	token string // read from TokenFile when the configuration loads
}

// Methods of a registry actor.
const (
	MethodRegister = "register"
	MethodList     = "list"
	MethodDelete   = "delete"
)

// MaxMetaBytes bounds a registration's meta object, measured in compact JSON.
const MaxMetaBytes = 4 << 10

// MaxAddressBytes and MaxRegionBytes bound the address and the region of an entry.
const (
	MaxAddressBytes = 256
	MaxRegionBytes  = 64
)

// GCAlarm is the name of the alarm that deletes expired entries.
const GCAlarm = "gc"

// gcBatch bounds the entries one firing of the gc alarm, or one refused registration,
// deletes. A firing that leaves due entries behind re-arms the alarm for now.
const gcBatch = 1000

// Registration is the body of MethodRegister: register a server or heartbeat it.
type Registration struct {
	ServerID string          `json:"server_id"`
	Address  string          `json:"address"`
	Region   string          `json:"region,omitempty"`
	Meta     json.RawMessage `json:"meta,omitempty"`
}

// Registered is the reply of MethodRegister. Created is true for a new entry (including one
// re-registering after it expired) and false for a heartbeat of a live entry.
type Registered struct {
	ServerID     string `json:"server_id"`
	RegisteredAt int64  `json:"registered_at"`
	LastSeen     int64  `json:"last_seen"`
	Created      bool   `json:"created"`
}

// Deletion is the body of MethodDelete.
type Deletion struct {
	ServerID string `json:"server_id"`
}

// Entry is one live server in a List.
type Entry struct {
	ServerID     string          `json:"server_id"`
	Address      string          `json:"address"`
	Region       string          `json:"region"`
	Meta         json.RawMessage `json:"meta"`
	RegisteredAt int64           `json:"registered_at"`
	LastSeen     int64           `json:"last_seen"`
}

// List is the reply of MethodList: the live entries in server_id order (never nil).
type List struct {
	Servers []Entry `json:"servers"`
}

// Validate checks r and puts Meta in canonical form: compact JSON, "{}" when absent or null.
// Errors: invalid_id (server_id not ^[A-Za-z0-9_-]{1,64}$), invalid_request (address missing;
// address over MaxAddressBytes or region over MaxRegionBytes; meta not a JSON object, or over
// MaxMetaBytes once compacted).
func (r *Registration) Validate() *actors.Error {
	if !ident.Name(r.ServerID) {
		return actors.Errorf("invalid_id", "server_id is not a valid identifier")
	}
	if r.Address == "" {
		return actors.Errorf("invalid_request", "missing required field %q", "address")
	}
	if len(r.Address) > MaxAddressBytes || len(r.Region) > MaxRegionBytes {
		return actors.Errorf("invalid_request", "address is limited to %d bytes and region to %d", MaxAddressBytes, MaxRegionBytes)
	}
	meta := bytes.TrimSpace(r.Meta)
	if len(meta) == 0 || string(meta) == "null" {
		r.Meta = json.RawMessage("{}")
		return nil
	}
	var compact bytes.Buffer
	if meta[0] != '{' || json.Compact(&compact, meta) != nil {
		return actors.Errorf("invalid_request", "meta must be a JSON object")
	}
	if compact.Len() > MaxMetaBytes {
		return actors.Errorf("invalid_request", "meta is %d bytes of JSON; at most %d are allowed", compact.Len(), MaxMetaBytes)
	}
	r.Meta = compact.Bytes()
	return nil
}

// Kind returns the actor kind.
func Kind(cfg Config) actors.Kind {
	return actors.Kind{Name: KindName, New: func(string) actors.Handler { return &registry{cfg: cfg} }}
}

// registry is one registry's activation. It caches no state, only a scan hint: every message
// reads what it needs, each read O(1) except the ranges it walks.
type registry struct {
	cfg Config
	// collected is the index key of the last entry this activation collected, or nil. Every
	// index key before it is gone for good: entries are collected oldest first, and an entry
	// written later has last_seen = now ≥ (that entry's last_seen + TTL) > its last_seen, by
	// the partition clock, which never goes back. Scans of the expired range start here, so
	// they do not walk Pebble's tombstones of everything collected before. It is set only
	// once the message that collected the entry cannot roll back (a failed commit discards
	// the activation with it); nil, the start of the index, is always correct.
	collected []byte
}

// record is the value of a srv/ key.
type record struct {
	Address      string          `json:"address"`
	Region       string          `json:"region"`
	Meta         json.RawMessage `json:"meta"`
	RegisteredAt int64           `json:"registered_at"`
	LastSeen     int64           `json:"last_seen"`
}

var (
	count     = actors.Counter{Key: []byte("meta/count")}
	prefixSrv = []byte("srv/")
	seenIndex = actors.TimeIndex{Prefix: []byte("seen/")}
)

func srvKey(id string) []byte { return append(append([]byte(nil), prefixSrv...), id...) }

// methods are the registry's messages.
var methods = actors.Dispatch[*registry]{Name: "server registry", Methods: map[string]actors.Method[*registry]{
	MethodRegister: actors.JSON((*registry).register),
	MethodList:     func(r *registry, ctx *actors.Context, _ actors.Request) ([]byte, error) { return r.list(ctx) },
	MethodDelete: actors.JSON(func(r *registry, ctx *actors.Context, d Deletion) ([]byte, error) {
		return nil, r.delete(ctx, d.ServerID)
	}),
}}

func (r *registry) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	return methods.Receive(r, ctx, req)
}

// ttl is the TTL in milliseconds (at least 1).
func (r *registry) ttl() int64 { return max(r.cfg.TTL.Milliseconds(), 1) }

// live reports whether an entry seen at lastSeen is live at now: seen within the TTL.
func (r *registry) live(lastSeen, now int64) bool { return now < lastSeen+r.ttl() }

// register creates an entry (201 in the API), heartbeats a live one (200), or refuses a new
// one with registry_full when MaxServers live entries exist. An expired entry not yet
// collected counts as absent: it is collected and the server registers anew.
func (r *registry) register(ctx *actors.Context, reg Registration) ([]byte, error) {
	if err := reg.Validate(); err != nil {
		return nil, err
	}
	now := ctx.Now().UnixMilli()
	id := reg.ServerID
	old, found, err := r.record(ctx, id)
	if err != nil {
		return nil, err
	}
	if found && r.live(old.LastSeen, now) {
		seenIndex.Delete(ctx, old.LastSeen, id)
		rec := record{Address: reg.Address, Region: reg.Region, Meta: reg.Meta, RegisteredAt: old.RegisteredAt, LastSeen: now}
		if err := r.put(ctx, id, rec); err != nil {
			return nil, err
		}
		return json.Marshal(Registered{ServerID: id, RegisteredAt: rec.RegisteredAt, LastSeen: now})
	}

	stored, err := count.Get(ctx)
	if err != nil {
		return nil, err
	}
	n := stored
	if found {
		r.remove(ctx, id, old.LastSeen)
		n--
	}
	collected := r.collected
	if n >= r.cfg.MaxServers {
		// Stale entries still stored must not count: collect the oldest, in expiry order,
		// until a slot frees or the oldest left is live.
		due, err := r.expired(ctx, now, min(n-r.cfg.MaxServers+1, gcBatch))
		if err != nil {
			return nil, err
		}
		if collected, err = r.collect(ctx, due); err != nil {
			return nil, err
		}
		n -= len(due)
	}
	if n >= r.cfg.MaxServers {
		full, err := r.full(ctx, now, collected)
		if err != nil {
			return nil, err
		}
		if n != stored {
			count.Set(ctx, n)
		}
		r.collected = collected
		return nil, full
	}
	rec := record{Address: reg.Address, Region: reg.Region, Meta: reg.Meta, RegisteredAt: now, LastSeen: now}
	if err := r.put(ctx, id, rec); err != nil {
		return nil, err
	}
	n++
	count.Set(ctx, n)
	if n == 1 {
		// The only entry: nothing else keeps the gc alarm pending.
		if err := ctx.SetAlarm(GCAlarm, time.UnixMilli(now+r.ttl())); err != nil {
			return nil, err
		}
	}
	r.collected = collected
	return json.Marshal(Registered{ServerID: id, RegisteredAt: now, LastSeen: now, Created: true})
}

// full is the registry_full outcome; RetryAfter is when the oldest entry (live, unless the
// collection was cut short) expires. from is where the index is known to start.
func (r *registry) full(ctx *actors.Context, now int64, from []byte) (*actors.Error, error) {
	seen, _, ok, err := seenIndex.First(ctx, from)
	if err != nil {
		return nil, err
	}
	e := actors.Errorf("registry_full", "the registry holds %d live servers", r.cfg.MaxServers)
	e.RetryAfter = time.Millisecond
	if ok {
		e.RetryAfter = time.Duration(max(seen+r.ttl()-now, 1)) * time.Millisecond
	}
	return e, nil
}

// expired lists up to limit expired index entries, oldest first.
func (r *registry) expired(ctx *actors.Context, now int64, limit int) ([]actors.KV, error) {
	// Expired means last_seen + ttl <= now, i.e. last_seen < now - ttl + 1.
	return seenIndex.Before(ctx, now-r.ttl()+1, r.collected, limit)
}

// collect deletes the entries of the index entries due, and returns the new scan hint (see
// registry.collected) for the caller to adopt once it cannot roll back. The caller owns
// meta/count.
func (r *registry) collect(ctx *actors.Context, due []actors.KV) ([]byte, error) {
	for _, kv := range due {
		seen, id, err := seenIndex.Parse(kv.Key)
		if err != nil {
			return nil, err
		}
		r.remove(ctx, id, seen)
	}
	if len(due) == 0 {
		return r.collected, nil
	}
	return due[len(due)-1].Key, nil
}

// list answers the live entries: the index range seen within the TTL, O(live entries).
func (r *registry) list(ctx *actors.Context) ([]byte, error) {
	now := ctx.Now().UnixMilli()
	kvs, err := seenIndex.From(ctx, now-r.ttl()+1, 0)
	if err != nil {
		return nil, err
	}
	out := List{Servers: make([]Entry, 0, len(kvs))}
	for _, kv := range kvs {
		_, id, err := seenIndex.Parse(kv.Key)
		if err != nil {
			return nil, err
		}
		rec, found, err := r.record(ctx, id)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("server registry %s: index entry %q has no record", ctx.ID(), id)
		}
		out.Servers = append(out.Servers, Entry{ServerID: id, Address: rec.Address, Region: rec.Region,
			Meta: rec.Meta, RegisteredAt: rec.RegisteredAt, LastSeen: rec.LastSeen})
	}
	sort.Slice(out.Servers, func(i, j int) bool { return out.Servers[i].ServerID < out.Servers[j].ServerID })
	return json.Marshal(out)
}

// delete removes a live entry; an absent or expired one is unknown_server (an expired one
// is collected all the same).
func (r *registry) delete(ctx *actors.Context, id string) error {
	if !ident.Name(id) {
		return actors.Errorf("invalid_id", "server_id is not a valid identifier")
	}
	rec, found, err := r.record(ctx, id)
	if err != nil {
		return err
	}
	if !found {
		return actors.Errorf("unknown_server", "server %q is not registered", id)
	}
	n, err := count.Get(ctx)
	if err != nil {
		return err
	}
	r.remove(ctx, id, rec.LastSeen)
	count.Set(ctx, n-1)
	if !r.live(rec.LastSeen, ctx.Now().UnixMilli()) {
		return actors.Errorf("unknown_server", "server %q expired", id)
	}
	return nil
}

// Alarm runs the gc alarm, the kind's only alarm: it deletes up to gcBatch expired entries,
// oldest first, and re-arms for the next expiry (for now when expired entries remain). With
// nothing left it lets the alarm go. It reads only the entries it deletes plus one.
func (r *registry) Alarm(ctx *actors.Context, _ actors.Alarm) error {
	now := ctx.Now().UnixMilli()
	due, err := r.expired(ctx, now, gcBatch+1)
	if err != nil {
		return err
	}
	next := int64(-1)
	if len(due) > gcBatch {
		due, next = due[:gcBatch], now
	} else {
		seen, _, ok, err := seenIndex.First(ctx, seenIndex.Key(now-r.ttl()+1, ""))
		if err != nil {
			return err
		}
		if ok {
			next = seen + r.ttl()
		}
	}
	if next >= 0 {
		if err := ctx.SetAlarm(GCAlarm, time.UnixMilli(next)); err != nil {
			return err
		}
	}
	if len(due) == 0 {
		return nil
	}
	n, err := count.Get(ctx)
	if err != nil {
		return err
	}
	collected, err := r.collect(ctx, due)
	if err != nil {
		return err
	}
	count.Set(ctx, n-len(due))
	r.collected = collected
	return nil
}

// record reads the entry of id.
func (r *registry) record(ctx *actors.Context, id string) (record, bool, error) {
	var rec record
	v, found, err := ctx.Get(srvKey(id))
	if err != nil || !found {
		return rec, false, err
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, false, fmt.Errorf("server registry %s: record %q: %w", ctx.ID(), id, err)
	}
	return rec, true, nil
}

// put writes the record of id and its index entry (the caller deletes any older one).
func (r *registry) put(ctx *actors.Context, id string, rec record) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record %q: %w", id, err)
	}
	ctx.Put(srvKey(id), v)
	seenIndex.Put(ctx, rec.LastSeen, id, []byte{})
	return nil
}

// remove deletes the record of id and its index entry (the caller owns meta/count).
func (r *registry) remove(ctx *actors.Context, id string, lastSeen int64) {
	ctx.Delete(srvKey(id))
	seenIndex.Delete(ctx, lastSeen, id)
}
