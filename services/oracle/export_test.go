package oracle

import "testing"

// PinIssueShards makes every issue of this process go to shards only — the first of them not
// yet tried, in order — until t ends, so that a test decides where nonces land.
func PinIssueShards(t testing.TB, shards ...string) {
	pinnedShards.Store(&shards)
	t.Cleanup(func() { pinnedShards.Store(nil) })
}
