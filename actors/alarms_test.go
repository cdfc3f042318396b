package actors_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/await"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/test/testkinds"
)

func setAlarm(t *testing.T, rt *actors.Runtime, id, name string, at time.Time) {
	t.Helper()
	b, _ := json.Marshal(testkinds.SetAlarm{Name: name, At: at.UnixMilli()})
	actortest.MustCall(t, rt, "counter", id, "set-alarm", b)
}

// Many named alarms per actor each fire once, on the right actor, carrying their scheduled
// time, and are deleted after firing.
func TestAlarmsFireOncePerName(t *testing.T) {
	e := actortest.New(t, actortest.Options{}, testkinds.Counter())
	base := time.Now().Add(100 * time.Millisecond).Truncate(time.Millisecond)
	want := map[string][]string{"x": {"a", "b", "c"}, "y": {"a"}}
	for id, names := range want {
		for i, n := range names {
			setAlarm(t, e.Runtime, id, n, base.Add(time.Duration(i)*20*time.Millisecond))
		}
	}
	// Moving an alarm replaces it: "c" on x fires once, at its new time.
	setAlarm(t, e.Runtime, "x", "c", base.Add(150*time.Millisecond))
	for id, names := range want {
		await.True(t, 10*time.Second, "alarms of "+id, func() bool {
			return len(decodeFirings(t, string(e.MustCall("counter", id, "fired", nil)))) == len(names)
		})
		fs := decodeFirings(t, string(e.MustCall("counter", id, "fired", nil)))
		for i, f := range fs {
			if f.Name != names[i] {
				t.Fatalf("%s fired %q, want %q", id, f.Name, names[i])
			}
			sched := base.Add(time.Duration(i) * 20 * time.Millisecond)
			if id == "x" && f.Name == "c" {
				sched = base.Add(150 * time.Millisecond)
			}
			if f.Scheduled != sched.UnixMilli() || f.FiredAt < f.Scheduled || f.Attempt != 0 {
				t.Fatalf("%s/%s firing %+v, scheduled want %d", id, f.Name, f, sched.UnixMilli())
			}
		}
		if a := string(e.MustCall("counter", id, "alarms", nil)); a != "null" {
			t.Fatalf("alarms of %s after firing: %s", id, a)
		}
	}
	if n := e.Metric("shardkeeper_alarms_fired_total", "", nil); n != 4 {
		t.Fatalf("alarms fired = %v, want 4", n)
	}
	if n := e.Metric("shardkeeper_alarm_lateness_seconds", "count", nil); n != 4 {
		t.Fatalf("lateness observations = %v, want 4", n)
	}
	if z := decodeFirings(t, string(e.MustCall("counter", "z", "fired", nil))); len(z) != 0 {
		t.Fatalf("actor without alarms fired %v", z)
	}
}

// A failing alarm is retried with doubling backoff, then parked and counted.
func TestFailingAlarmBacksOffThenParks(t *testing.T) {
	const base = 20 * time.Millisecond
	e := actortest.New(t, actortest.Options{Runtime: actors.Options{AlarmBackoff: base, MaxAlarmRetries: 6}}, testkinds.Counter())
	e.MustCall("counter", "f", "fail-alarms", []byte("true"))
	setAlarm(t, e.Runtime, "f", "doomed", time.Now())

	await.True(t, 20*time.Second, "alarm parked", func() bool {
		return e.Metric("shardkeeper_alarms_parked_total", "", nil) == 1
	})
	if n := e.Metric("shardkeeper_alarms_fired_total", "", nil); n != 7 {
		t.Fatalf("fired %v times, want 7 (first try + 6 retries)", n)
	}
	if n := e.Metric("shardkeeper_alarms_retried_total", "", nil); n != 6 {
		t.Fatalf("retried %v times, want 6", n)
	}
	// Backoff doubles: the total lateness across firings is at least 2+4+...+64 base units
	// after the first firing, since each retry is due base<<k after the failure before it.
	minSum := 0.0
	late := 0.0
	for k := range 6 {
		late += (base << k).Seconds()
		minSum += late
	}
	if sum := e.Metric("shardkeeper_alarm_lateness_seconds", "sum", nil); sum < minSum {
		t.Fatalf("sum of lateness %.3fs < %.3fs: retries were not backed off", sum, minSum)
	}
	if a := string(e.MustCall("counter", "f", "alarms", nil)); a != "null" {
		t.Fatalf("parked alarm still pending: %s", a)
	}
	// Parked means given up: letting the handler succeed now does not revive it.
	e.MustCall("counter", "f", "fail-alarms", []byte("false"))
	setAlarm(t, e.Runtime, "f", "fresh", time.Now())
	await.True(t, 10*time.Second, "fresh alarm", func() bool {
		return len(decodeFirings(t, string(e.MustCall("counter", "f", "fired", nil)))) == 1
	})
	if fs := decodeFirings(t, string(e.MustCall("counter", "f", "fired", nil))); fs[0].Name != "fresh" {
		t.Fatalf("fired %+v", fs)
	}
}

// A retried alarm succeeding later reports its attempt number and original schedule.
func TestAlarmRetrySucceeds(t *testing.T) {
	e := actortest.New(t, actortest.Options{Runtime: actors.Options{AlarmBackoff: 10 * time.Millisecond}}, testkinds.Counter())
	e.MustCall("counter", "r", "fail-alarms", []byte("true"))
	at := time.Now().Truncate(time.Millisecond)
	setAlarm(t, e.Runtime, "r", "flaky", at)
	await.True(t, 10*time.Second, "two retries", func() bool {
		return e.Metric("shardkeeper_alarms_retried_total", "", nil) >= 2
	})
	e.MustCall("counter", "r", "fail-alarms", []byte("false"))
	await.True(t, 10*time.Second, "success", func() bool {
		return len(decodeFirings(t, string(e.MustCall("counter", "r", "fired", nil)))) == 1
	})
	f := decodeFirings(t, string(e.MustCall("counter", "r", "fired", nil)))[0]
	if f.Scheduled != at.UnixMilli() || f.Attempt < 2 {
		t.Fatalf("firing %+v: want scheduled %d and attempt >= 2", f, at.UnixMilli())
	}
}

// Alarms are many per actor and stored in a time index: thousands spread over actors all fire.
func TestManyAlarms(t *testing.T) {
	e := actortest.New(t, actortest.Options{}, testkinds.Counter())
	at := time.Now().Add(50 * time.Millisecond)
	const actorsN, per = 20, 100
	for i := range actorsN {
		for j := range per {
			setAlarm(t, e.Runtime, fmt.Sprint("m", i), fmt.Sprint("n", j), at.Add(time.Duration(j)*time.Millisecond))
		}
	}
	await.True(t, 30*time.Second, "all alarms fired", func() bool {
		return e.Metric("shardkeeper_alarms_fired_total", "", nil) == actorsN*per
	})
	for i := range actorsN {
		if fs := decodeFirings(t, string(e.MustCall("counter", fmt.Sprint("m", i), "fired", nil))); len(fs) != per {
			t.Fatalf("actor m%d: %d firings, want %d", i, len(fs), per)
		}
	}
}
