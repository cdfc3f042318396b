package actortest

import (
	"fmt"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
)

// wakeKindName is the harness's own kind, which Wake uses.
const wakeKindName = "actortest-wake"

// wakeKind's actors set and clear one alarm, an hour after their clock: never due, it only
// makes its partition's scheduler look at the index.
var wakeKind = actors.Kind{Name: wakeKindName, New: func(string) actors.Handler { return waker{} }}

type waker struct{}

func (waker) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	switch req.Method {
	case "set":
		return nil, ctx.SetAlarm("wake", ctx.Now().Add(time.Hour))
	case "clear":
		return nil, ctx.DeleteAlarm("wake")
	}
	return nil, fmt.Errorf("%s: unknown method %q", wakeKindName, req.Method)
}

func (waker) Alarm(*actors.Context, actors.Alarm) error { return nil }

// Wake makes the alarm scheduler of the partition of (kind, id) scan its alarms now, as it
// does when an alarm is committed there. The scheduler sleeps by the wall clock until the next
// alarm it knows of; after a fake clock jumped, alarms due by the fake clock fire once woken.
// It leaves no key behind. It needs commits to go through (not with a Gated replicator held).
func (h *Harness) Wake(kind, id string) {
	h.t.Helper()
	p := h.Partition(kind, id)
	waker := ""
	for i := 0; waker == ""; i++ {
		if w := fmt.Sprint("p", i); h.Partition(wakeKindName, w) == p {
			waker = w
		}
	}
	h.MustCall(wakeKindName, waker, "set", nil)
	h.MustCall(wakeKindName, waker, "clear", nil)
}
