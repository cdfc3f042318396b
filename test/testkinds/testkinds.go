// Package testkinds holds actor kinds that exist to test the runtime: a counter that also
// records its alarm firings. Tests in-process and the multi-process test node use them.
package testkinds

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
)

// CounterKind is the name of the counter kind.
const CounterKind = "counter"

// Counter is a kind whose actors hold one integer and a log of alarm firings.
//
// Methods: "incr" (adds one, replies the new value), "get" (replies the value), "set-alarm"
// (body SetAlarm), "fail-alarms" (body "true"/"false": whether alarm handlers fail),
// "alarms" (replies the pending alarms), "fired" (replies []Firing in name order).
func Counter() actors.Kind {
	return actors.Kind{Name: CounterKind, New: func(string) actors.Handler { return &counter{} }}
}

type counter struct{}

// SetAlarm is the body of "set-alarm".
type SetAlarm struct {
	Name string `json:"name"`
	At   int64  `json:"at"` // Unix ms
}

// Firing records one successful alarm firing.
type Firing struct {
	Name      string `json:"name"`
	Scheduled int64  `json:"scheduled"`
	Attempt   int    `json:"attempt"`
	FiredAt   int64  `json:"fired_at"`
	// LateMS is how late the firing was relative to its scheduled time.
	LateMS int64 `json:"late_ms"`
}

var (
	keyN    = []byte("n")
	keyFail = []byte("fail")
	prefixF = []byte("fired/")
)

func (c *counter) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	switch req.Method {
	case "incr":
		n, err := value(ctx)
		if err != nil {
			return nil, err
		}
		n++
		ctx.Put(keyN, []byte(strconv.FormatInt(n, 10)))
		return []byte(strconv.FormatInt(n, 10)), nil
	case "get":
		n, err := value(ctx)
		return []byte(strconv.FormatInt(n, 10)), err
	case "set-alarm":
		var s SetAlarm
		if err := json.Unmarshal(req.Body, &s); err != nil || s.Name == "" {
			return nil, fmt.Errorf("bad set-alarm body: %q", req.Body)
		}
		return nil, ctx.SetAlarm(s.Name, time.UnixMilli(s.At))
	case "fail-alarms":
		ctx.Put(keyFail, req.Body)
		return nil, nil
	case "alarms":
		as, err := ctx.Alarms()
		if err != nil {
			return nil, err
		}
		return json.Marshal(as)
	case "fired":
		kvs, err := ctx.List(actors.ListOptions{Prefix: prefixF})
		if err != nil {
			return nil, err
		}
		out := []Firing{}
		for _, kv := range kvs {
			var f Firing
			if err := json.Unmarshal(kv.Value, &f); err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return json.Marshal(out)
	}
	return nil, fmt.Errorf("counter: unknown method %q", req.Method)
}

// ErrAlarmFailed is what the alarm handler returns while "fail-alarms" is set.
var ErrAlarmFailed = errors.New("alarm handler told to fail")

func (c *counter) Alarm(ctx *actors.Context, a actors.Alarm) error {
	fail, _, err := ctx.Get(keyFail)
	if err != nil {
		return err
	}
	if string(fail) == "true" {
		return ErrAlarmFailed
	}
	now := ctx.Now().UnixMilli()
	b, _ := json.Marshal(Firing{Name: a.Name, Scheduled: a.Scheduled.UnixMilli(), Attempt: a.Attempt,
		FiredAt: now, LateMS: now - a.Scheduled.UnixMilli()})
	ctx.Put(append(append([]byte(nil), prefixF...), a.Name...), b)
	return nil
}

func value(ctx *actors.Context) (int64, error) {
	v, ok, err := ctx.Get(keyN)
	if err != nil || !ok {
		return 0, err
	}
	return strconv.ParseInt(string(v), 10, 64)
}
