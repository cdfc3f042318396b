package actors

import (
	"bytes"
	"fmt"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// StoredState is an actor's committed storage as the runtime keeps it (keys.go): the keys its
// handler wrote and its alarms. Tests and tools read it with ReadStoredState rather than
// knowing the layout.
type StoredState struct {
	// Data holds the actor's user keys and values, in key order.
	Data []KV
	// Alarms are the pending alarms by name; Parked, those parked after repeated failures.
	Alarms, Parked map[string]StoredAlarm
}

// StoredAlarm is an alarm's record.
type StoredAlarm struct {
	Due, Scheduled int64 // Unix ms
	Attempt        int
}

// Get returns the value of a user key.
func (s StoredState) Get(key string) ([]byte, bool) {
	for _, kv := range s.Data {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Keys counts the actor's data keys and alarm records.
func (s StoredState) Keys() int { return len(s.Data) + len(s.Alarms) + len(s.Parked) }

// ReadStoredState reads the committed storage of the actor (kind, id) in partition p of
// store, in one consistent scan.
func ReadStoredState(store *persistence.Store, p uint32, kind, id string) (StoredState, error) {
	s := StoredState{Alarms: map[string]StoredAlarm{}, Parked: map[string]StoredAlarm{}}
	data, alarm, parked := actorPrefix(secData, kind, id), actorPrefix(secAlarm, kind, id), actorPrefix(secParked, kind, id)
	var bad error
	err := store.Scan(p, nil, nil, false, func(k, v []byte) bool {
		var into map[string]StoredAlarm
		var name []byte
		switch {
		case bytes.HasPrefix(k, data):
			s.Data = append(s.Data, KV{Key: bytes.Clone(k[len(data):]), Value: bytes.Clone(v)})
			return true
		case bytes.HasPrefix(k, alarm):
			into, name = s.Alarms, k[len(alarm):]
		case bytes.HasPrefix(k, parked):
			into, name = s.Parked, k[len(parked):]
		default:
			return true
		}
		r, err := decodeAlarmRecord(v)
		if err != nil {
			bad = fmt.Errorf("alarm %q of %s/%s: %w", name, kind, id, err)
			return false
		}
		into[string(name)] = StoredAlarm{Due: r.due, Scheduled: r.scheduled, Attempt: r.attempt}
		return true
	})
	if err == nil {
		err = bad
	}
	return s, err
}
