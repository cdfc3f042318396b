package config

import (
	"strings"
	"testing"
)

// Services trusted with money are reached over https, or plain http to loopback; the flag
// widens plain http to private networks only; an error never shows credentials.
func TestCheckEndpoint(t *testing.T) {
	for _, c := range []struct {
		url          string
		private, bad bool // with the flag; refused
	}{
		{"https://rpc.mainnet.near.org", false, false},
		{"https://user:secret@rpc.example.com/?apikey=secret", false, false},
		{"http://127.0.0.1:3030", false, false},
		{"http://[::1]:3030", false, false},
		{"http://localhost:3030", false, false},
		{"http://rpc.mainnet.near.org", false, true},
		{"http://10.0.0.5:3030", false, true},
		{"http://10.0.0.5:3030", true, false},
		{"http://192.168.1.9", true, false},
		{"http://172.20.0.2", true, false},
		{"http://[fd00::5]:3030", true, false},
		{"http://100.64.1.1", true, false},
		{"http://near-rpc.internal:3030", true, false},
		{"http://8.8.8.8:3030", true, true},
		{"http://[2001:4860::8888]", true, true},
		{"ftp://127.0.0.1", true, true},
		{"127.0.0.1:3030", true, true},
		{"http://user:secret@10.0.0.5/?apikey=secret", false, true},
	} {
		err := CheckEndpoint(c.url, c.private)
		if (err != nil) != c.bad {
			t.Errorf("%s (private http %v): %v", c.url, c.private, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows credentials: %v", c.url, err)
		}
	}
}
