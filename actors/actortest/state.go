package actortest

import (
	"github.com/shardkeeper/shardkeeper/actors"
)

// State is an actor's committed storage: the keys its handler wrote and its alarms.
type State = actors.StoredState

// StoredAlarm is an alarm's record.
type StoredAlarm = actors.StoredAlarm

// State reads the committed storage of the actor (kind, id).
func (h *Harness) State(kind, id string) State {
	h.t.Helper()
	s, err := actors.ReadStoredState(h.Store, h.Partition(kind, id), kind, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}
