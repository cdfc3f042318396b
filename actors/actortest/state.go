package actortest

import (
	"bytes"
	"encoding/binary"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// State is an actor's committed storage, read from one consistent scan of its partition: the
// keys its handler wrote and its alarms. It follows the layout of the actors' state keys
// (docs/runtime.md): 'a'<kind><id><user key> data, 'b'<kind><id><name> alarm records, 'x'
// parked alarms, with <kind> and <id> length-prefixed.
type State struct {
	// Data holds the actor's user keys and values, in key order.
	Data []actors.KV
	// Alarms are the pending alarms by name; Parked, those parked after repeated failures.
	Alarms, Parked map[string]StoredAlarm
}

// StoredAlarm is an alarm's record.
type StoredAlarm struct {
	Due, Scheduled int64 // Unix ms
	Attempt        int
}

// Get returns the value of a user key.
func (s State) Get(key string) ([]byte, bool) {
	for _, kv := range s.Data {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Keys counts the actor's data keys and alarm records.
func (s State) Keys() int { return len(s.Data) + len(s.Alarms) + len(s.Parked) }

// State reads the committed storage of the actor (kind, id).
func (h *Harness) State(kind, id string) State {
	h.t.Helper()
	s := State{Alarms: map[string]StoredAlarm{}, Parked: map[string]StoredAlarm{}}
	data, alarm, parked := actorPrefix('a', kind, id), actorPrefix('b', kind, id), actorPrefix('x', kind, id)
	err := h.Store.Scan(h.Partition(kind, id), nil, nil, false, func(k, v []byte) bool {
		switch {
		case bytes.HasPrefix(k, data):
			s.Data = append(s.Data, actors.KV{Key: bytes.Clone(k[len(data):]), Value: bytes.Clone(v)})
		case bytes.HasPrefix(k, alarm):
			s.Alarms[string(k[len(alarm):])] = h.storedAlarm(k, v)
		case bytes.HasPrefix(k, parked):
			s.Parked[string(k[len(parked):])] = h.storedAlarm(k, v)
		}
		return true
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// storedAlarm decodes an alarm record: due u64, scheduled u64, attempt u8.
func (h *Harness) storedAlarm(k, v []byte) StoredAlarm {
	if len(v) != 17 {
		h.t.Fatalf("alarm record %q of %d bytes", k, len(v))
	}
	return StoredAlarm{Due: int64(binary.BigEndian.Uint64(v)), Scheduled: int64(binary.BigEndian.Uint64(v[8:])), Attempt: int(v[16])}
}

func actorPrefix(sec byte, kind, id string) []byte {
	k := persistence.AppendComponent([]byte{sec}, []byte(kind))
	return persistence.AppendComponent(k, []byte(id))
}
