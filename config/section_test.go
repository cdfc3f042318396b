package config

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// limits is the typed struct of a section, as a domain declares one.
type limits struct {
	TTL  time.Duration
	Max  int
	Name string
}

var testSection = NewSection("test domain", func(l *limits) []Option {
	return []Option{
		Duration(&l.TTL, "test-ttl", "5m", "lifetime of a thing").Checked(Positive(&l.TTL)),
		Int(&l.Max, "test-max", "10", "things per owner (>= 1)").Checked(AtLeast(&l.Max, 1)),
		String(&l.Name, "test-name", "", "a name"),
	}
})

var testDefaults = limits{TTL: 5 * time.Minute, Max: 10}

func TestSectionDefaults(t *testing.T) {
	c, err := Load(baseArgs, env(nil), nil, testSection)
	if err != nil {
		t.Fatal(err)
	}
	if got := testSection.Get(c); got != testDefaults {
		t.Fatalf("loaded section = %+v, want the defaults %+v", got, testDefaults)
	}
	// A Config that never held the section reads as its defaults.
	if got := testSection.Get(Default()); got != testDefaults {
		t.Fatalf("section of Default() = %+v, want %+v", got, testDefaults)
	}
}

// TestSectionSources sets each option of a section from each source, as core options are.
func TestSectionSources(t *testing.T) {
	for name, s := range map[string]struct {
		in   string
		want limits
	}{
		"test-ttl":  {"90s", limits{TTL: 90 * time.Second, Max: 10}},
		"test-max":  {"0x20", limits{TTL: 5 * time.Minute, Max: 32}},
		"test-name": {"n1", limits{TTL: 5 * time.Minute, Max: 10, Name: "n1"}},
	} {
		for source, load := range map[string]func(t *testing.T) (Config, error){
			"flag": func(*testing.T) (Config, error) {
				return Load(append(baseArgs, "--"+name, s.in), env(nil), nil, testSection)
			},
			"flag=": func(*testing.T) (Config, error) {
				return Load(append(baseArgs, "-"+name+"="+s.in), env(nil), nil, testSection)
			},
			"env": func(*testing.T) (Config, error) {
				return Load(baseArgs, env(map[string]string{envName(name): s.in}), nil, testSection)
			},
			"yaml": func(t *testing.T) (Config, error) {
				return Load(append(baseArgs, "--config", writeFile(t, name+": "+s.in+"\n")), env(nil), nil, testSection)
			},
		} {
			t.Run(name+"/"+source, func(t *testing.T) {
				c, err := load(t)
				if err != nil {
					t.Fatal(err)
				}
				if got := testSection.Get(c); got != s.want {
					t.Fatalf("section = %+v, want %+v", got, s.want)
				}
			})
		}
	}
}

func TestSectionPrecedence(t *testing.T) {
	file := writeFile(t, "test-max: 3\ntest-name: file\n")
	c, err := Load(append(baseArgs, "--config", file, "--test-max", "5"),
		env(map[string]string{"SHARDKEEPER_TEST_MAX": "4", "SHARDKEEPER_TEST_NAME": "env"}), nil, testSection)
	if err != nil {
		t.Fatal(err)
	}
	if got := testSection.Get(c); got.Max != 5 || got.Name != "env" {
		t.Fatalf("section = %+v, want max 5 from the flag and name from the environment", got)
	}
}

// Values that do not parse and values that fail a check are errors naming the flag.
func TestSectionErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		args  []string
		env   map[string]string
		yaml  string
		exact string
	}{
		{name: "flag int", args: []string{"--test-max", "many"}, exact: `invalid value "many" for --test-max: not an integer`},
		{name: "env duration", env: map[string]string{"SHARDKEEPER_TEST_TTL": "1d"},
			exact: `invalid value "1d" for --test-ttl (from SHARDKEEPER_TEST_TTL): time: unknown unit "d" in duration "1d"`},
		{name: "check int", args: []string{"--test-max", "0"}, exact: `invalid --test-max: must be at least 1, got 0`},
		{name: "check duration", yaml: "test-ttl: 0s\n", exact: `invalid --test-ttl: must be positive, got 0s`},
		{name: "core and section checks together", args: []string{"--test-ttl", "-1s", "--test-max", "-2", "--partitions", "0"},
			exact: "invalid --partitions: must be between 1 and 4096, got 0\n" +
				"invalid --test-max: must be at least 1, got -2\n" +
				"invalid --test-ttl: must be positive, got -1s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{}, baseArgs...), tt.args...)
			if tt.yaml != "" {
				args = append(args, "--config", writeFile(t, tt.yaml))
			}
			_, err := Load(args, env(tt.env), nil, testSection)
			if err == nil || err.Error() != tt.exact {
				t.Fatalf("Load = %v, want %q", err, tt.exact)
			}
		})
	}
	// Without the section, its flags and keys are unknown.
	if _, err := Load(append(baseArgs, "--test-max", "3"), env(nil), nil); err == nil ||
		!strings.Contains(err.Error(), "flag provided but not defined: -test-max") {
		t.Fatalf("Load without the section = %v, want an unknown flag", err)
	}
}

func TestSectionHelp(t *testing.T) {
	var out bytes.Buffer
	if _, err := Load([]string{"--help"}, env(nil), &out, testSection); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Load(--help) = %v", err)
	}
	usage := out.String()
	heading := strings.Index(usage, "Flags of the test domain:")
	if heading < 0 || heading < strings.Index(usage, "--node-id ") {
		t.Fatalf("usage has no heading for the section after the core flags:\n%s", usage)
	}
	line := usageLine(t, usage, "--test-ttl ")
	for _, want := range []string{"duration", "SHARDKEEPER_TEST_TTL", "lifetime of a thing", `(default "5m")`} {
		if !strings.Contains(line, want) {
			t.Errorf("usage line %q lacks %q", line, want)
		}
	}
	if strings.Index(usage, "--test-ttl ") < heading {
		t.Errorf("--test-ttl is listed before its section's heading:\n%s", usage)
	}
}

func TestSectionDeclaredTwice(t *testing.T) {
	clash := NewSection("clash", func(p *int) []Option { return []Option{Int(p, "partitions", "1", "")} })
	if _, err := Load(baseArgs, env(nil), nil, clash); err == nil || !strings.Contains(err.Error(), "--partitions is declared twice") {
		t.Fatalf("Load = %v, want an error naming the option declared twice", err)
	}
}

// Set and Update change one Config only, never a copy made before.
func TestSectionSetDoesNotAlias(t *testing.T) {
	a, err := Load(baseArgs, env(nil), nil, testSection)
	if err != nil {
		t.Fatal(err)
	}
	b := a
	testSection.Update(&b, func(l *limits) { l.Max = 3 })
	if got := testSection.Get(a); got != testDefaults {
		t.Fatalf("copy changed by Update: %+v", got)
	}
	if got := testSection.Get(b).Max; got != 3 {
		t.Fatalf("Update: max %d, want 3", got)
	}
	c := Default()
	testSection.Set(&c, limits{Max: 7})
	if got := testSection.Get(c); got != (limits{Max: 7}) {
		t.Fatalf("Set: %+v", got)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "invalid --test-ttl: must be positive") {
		t.Fatalf("Validate of a section set in code = %v, want its checks to run", err)
	}
}
