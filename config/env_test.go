package config

import (
	"errors"
	"flag"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Every SHARDKEEPER_* variable that sets no option is reported, once, with the option it most
// likely misspells; options (core and sections'), other variables and the variables the
// repository's scripts read are not.
func TestUnknownEnv(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin",
		"SHARDKEEPER_DATA_DIR=/var/lib/shardkeeper", // an option
		"SHARDKEEPER_TEST_MAX=3",                    // a section's option
		"SHARDKEEPER_DATADIR=/srv",                  // separators dropped
		"SHARDKEEPER_NODEID=n1",
		"SHARDKEEPER_PARTITONS=32", // a letter dropped
		"SHARDKEEPER_LOG_LEVLE=debug",
		"SHARDKEEPER_TOKEN_ADMIN=secret-value", // words swapped
		"SHARDKEEPER_http_addr=:9000",          // lower case: not read
		"SHARDKEEPER_TEST_MAXX=4",              // near a section's option
		"SHARDKEEPER_COLOR=blue",               // nothing close
		"SHARDKEEPER_COLOR=green",              // listed twice, reported once
		"SHARDKEEPER_BIN=./bin/shardkeeper",    // read by the deploy scripts
		"SHARDKEEPER_=x",
	}
	got := UnknownEnv(environ, testSection)
	want := []UnknownVar{
		{"SHARDKEEPER_", ""},
		{"SHARDKEEPER_COLOR", ""},
		{"SHARDKEEPER_DATADIR", "SHARDKEEPER_DATA_DIR"},
		{"SHARDKEEPER_LOG_LEVLE", "SHARDKEEPER_LOG_LEVEL"},
		{"SHARDKEEPER_NODEID", "SHARDKEEPER_NODE_ID"},
		{"SHARDKEEPER_PARTITONS", "SHARDKEEPER_PARTITIONS"},
		{"SHARDKEEPER_TEST_MAXX", "SHARDKEEPER_TEST_MAX"},
		{"SHARDKEEPER_TOKEN_ADMIN", "SHARDKEEPER_ADMIN_TOKEN"},
		{"SHARDKEEPER_http_addr", "SHARDKEEPER_HTTP_ADDR"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("UnknownEnv =\n%v\nwant\n%v", got, want)
	}
	// Without the section, its variables are unknown too.
	if got := UnknownEnv([]string{"SHARDKEEPER_TEST_MAX=3"}); len(got) != 1 || got[0].Name != "SHARDKEEPER_TEST_MAX" {
		t.Errorf("UnknownEnv without the section = %v", got)
	}
	if got := UnknownEnv(nil); got != nil {
		t.Errorf("UnknownEnv of an empty environment = %v", got)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"PARTITONS", "PARTITIONS", 1}, {"LOG_LEVLE", "LOG_LEVEL", 2}} {
		if d := editDistance(c.a, c.b); d != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}

// Preview gives the settings as the sources set them without reading the files they name or
// validating, and prints the usage on --help as Load does.
func TestPreview(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing-token")
	args := append([]string{"--admin-token-file", missing, "--partitions", "0"}, baseArgs...)
	if _, err := Load(args, env(map[string]string{"SHARDKEEPER_LOG_FORMAT": "text"}), nil); err == nil {
		t.Fatal("Load accepted a missing token file and 0 partitions")
	}
	c, err := Preview(args, env(map[string]string{"SHARDKEEPER_LOG_FORMAT": "text"}), nil)
	if err != nil || c.LogFormat != "text" || c.Partitions != 0 || c.AdminTokenFile != missing || c.AdminToken != "" {
		t.Fatalf("Preview = format %q, partitions %d, token file %q, token %q, %v", c.LogFormat, c.Partitions, c.AdminTokenFile, c.AdminToken, err)
	}
	if _, err := Preview([]string{"--bogus"}, nil, nil); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("Preview with an unknown flag: %v", err)
	}
	var usage strings.Builder
	if _, err := Preview([]string{"--help"}, nil, &usage, testSection); !errors.Is(err, flag.ErrHelp) || !strings.Contains(usage.String(), "--test-max") {
		t.Errorf("Preview --help: %v, usage %q", err, usage.String())
	}
}
