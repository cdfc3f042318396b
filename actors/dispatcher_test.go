package actors

import (
	"sync"
	"testing"
)

// Every scheduled turn runs exactly once, turns never wait for one another, the pool of
// parked workers stays bounded, and turns scheduled after close still run.
func TestDispatcherRunsEveryTurn(t *testing.T) {
	d := newDispatcher(4)
	const turns = 10000
	var mu sync.Mutex
	ran := make([]int, turns)
	var wg sync.WaitGroup
	wg.Add(turns)
	for i := range turns {
		d.Schedule(func() {
			mu.Lock()
			ran[i]++
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	for i, n := range ran {
		if n != 1 {
			t.Fatalf("turn %d ran %d times", i, n)
		}
	}
	if p := d.parked.Load(); p > 4 {
		t.Fatalf("%d parked workers, want at most 4", p)
	}

	// A turn that blocks does not hold up others: the second runs while the first waits.
	release := make(chan struct{})
	second := make(chan struct{})
	d.Schedule(func() { <-release })
	d.Schedule(func() { close(second) })
	<-second
	close(release)

	d.close()
	done := make(chan struct{})
	d.Schedule(func() { close(done) })
	<-done
}
