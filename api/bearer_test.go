package api_test

import (
	"net/http/httptest"
	"testing"

	"github.com/shardkeeper/shardkeeper/api"
)

// BearerCheck holds for the configured token only, and never when none is configured: not
// even for an empty bearer token, which a request built in process can carry.
func TestBearerCheck(t *testing.T) {
	for _, c := range []struct {
		token, header string
		want          bool
	}{
		{"s3cret", "Bearer s3cret", true},
		{"s3cret", "Bearer s3cre", false},
		{"s3cret", "Bearer s3cret ", false},
		{"s3cret", "bearer s3cret", false},
		{"s3cret", "s3cret", false},
		{"s3cret", "", false},
		{"", "Bearer ", false},
		{"", "", false},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if got := api.BearerCheck(c.token)(r); got != c.want {
			t.Errorf("token %q, Authorization %q: %v, want %v", c.token, c.header, got, c.want)
		}
	}
}
