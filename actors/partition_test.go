package actors

import (
	"errors"
	"testing"
)

// A call waiting for readiness is woken when the leadership is lost, and refused from then
// on; before any report it waits.
func TestDeposedWakesWaiters(t *testing.T) {
	p := newPartition(nil, 0)
	wait, err := p.deliver(nil, "x", nil)
	if wait == nil || err != nil {
		t.Fatalf("before any leadership report: wait %v, err %v; want to wait", wait, err)
	}
	p.setLeader(false)
	select {
	case <-wait:
	default:
		t.Fatal("the waiting call was not woken by the loss of the leadership")
	}
	if wait, err := p.deliver(nil, "x", nil); wait != nil || !errors.Is(err, ErrNotApplied) {
		t.Fatalf("after the loss: wait %v, err %v; want ErrNotApplied at once", wait, err)
	}
	p.setLeader(false) // a second report wakes nothing twice
	if _, err := p.deliver(nil, "x", nil); !errors.Is(err, ErrNotApplied) {
		t.Fatalf("after a second loss report: %v, want ErrNotApplied", err)
	}
}
