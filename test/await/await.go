// Package await waits in tests for a condition to hold — polling with a deadline, never a
// fixed sleep standing in for synchronization.
package await

import (
	"testing"
	"time"
)

// True polls cond every 5 ms until it holds, failing t (naming what it waited for) if it
// still does not after timeout.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
