package actors

import (
	"encoding/binary"
	"fmt"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// Relative state keys (inside a partition's 's' section, see persistence.StateKey):
//
//	'a' <kind> <id> <user key>        actor storage
//	'b' <kind> <id> <name>            alarm record: due u64, scheduled u64, attempt u8
//	'l' <due u64> <kind> <id> <name>  alarm time index, ordered by due time (Unix ms)
//	'x' <kind> <id> <name>            parked alarm: the record of its last failed firing
//
// <kind> and <id> are length-prefixed components, so any bytes are safe in them and in the
// trailing user key or alarm name. An actor owns exactly its 'a' and 'b' ranges and its own
// entries of 'l' and 'x', so activations never write each other's keys.
const (
	secData   = 'a'
	secAlarm  = 'b'
	secIndex  = 'l'
	secParked = 'x'
)

func actorPrefix(sec byte, kind, id string) []byte {
	k := []byte{sec}
	k = persistence.AppendComponent(k, []byte(kind))
	return persistence.AppendComponent(k, []byte(id))
}

func indexKey(due int64, kind, id, name string) []byte {
	k := binary.BigEndian.AppendUint64([]byte{secIndex}, uint64(due))
	k = persistence.AppendComponent(k, []byte(kind))
	k = persistence.AppendComponent(k, []byte(id))
	return append(k, name...)
}

// indexBound is the first index key due at or after t.
func indexBound(t int64) []byte { return binary.BigEndian.AppendUint64([]byte{secIndex}, uint64(t)) }

type indexEntry struct {
	due            int64
	kind, id, name string
}

func parseIndexKey(k []byte) (indexEntry, error) {
	var e indexEntry
	if len(k) < 9 || k[0] != secIndex {
		return e, fmt.Errorf("not an alarm index key: %x", k)
	}
	e.due = int64(binary.BigEndian.Uint64(k[1:9]))
	kind, rest, err := persistence.ReadComponent(k[9:])
	if err != nil {
		return e, err
	}
	id, name, err := persistence.ReadComponent(rest)
	if err != nil {
		return e, err
	}
	e.kind, e.id, e.name = string(kind), string(id), string(name)
	return e, nil
}

// alarmRecord is the value of an alarm's 'b' key (and of its 'x' key once parked).
type alarmRecord struct {
	due, scheduled int64
	attempt        int
}

func (r alarmRecord) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(r.due))
	b = binary.BigEndian.AppendUint64(b, uint64(r.scheduled))
	return append(b, byte(r.attempt))
}

func decodeAlarmRecord(b []byte) (alarmRecord, error) {
	if len(b) != 17 {
		return alarmRecord{}, fmt.Errorf("alarm record of %d bytes", len(b))
	}
	return alarmRecord{
		due:       int64(binary.BigEndian.Uint64(b)),
		scheduled: int64(binary.BigEndian.Uint64(b[8:])),
		attempt:   int(b[16]),
	}, nil
}
