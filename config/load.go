package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// envPrefix is the prefix of every environment variable read by Load.
const envPrefix = "SHARDKEEPER_"

// envName is the environment variable of the flag name: SHARDKEEPER_ATTEST_NONCE_TTL for
// attest-nonce-ttl.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Load builds the configuration from args (without the program/subcommand name, e.g.
// os.Args[2:]), the environment given as a lookup function (os.LookupEnv in production, a map
// in tests; nil means an empty environment), and the YAML file named by --config or
// SHARDKEEPER_CONFIG if any, for the core settings and those of groups. Precedence is flag >
// environment > file > default. The result is validated with Validate.
//
// An environment variable that is set counts even when empty. A repeated --join adds to the
// list; otherwise a later occurrence of a flag replaces an earlier one.
//
// Errors name the flag, e.g. `invalid value "abc" for --attest-nonce-ttl: time: invalid
// duration "abc"`, plus the environment variable or file position when the value came from
// there. `-h`/`--help` prints the usage to usage and returns flag.ErrHelp; other errors print
// nothing (the caller prints the error and exits 2).
func Load(args []string, lookupEnv func(string) (string, bool), usage io.Writer, groups ...Group) (Config, error) {
	s, err := load(args, lookupEnv, usage, groups)
	if err != nil {
		return Config{}, err
	}
	// The checks of core options that load something (a token file) run once every source
	// is applied; Validate runs the sections' own.
	for _, o := range s.core {
		if o.Check != nil {
			if err := o.Check(); err != nil {
				return Config{}, fmt.Errorf("invalid --%s: %w", o.Name, err)
			}
		}
	}
	if err := s.c.Validate(); err != nil {
		return Config{}, err
	}
	return s.c, nil
}

// Preview is Load without the checks and the validation: the settings as the flags, the
// environment and the --config file give them, with no file of theirs read (token files, key
// files) and nothing logged, for what must be known before Load runs, such as the format of
// the logs that report its warnings. Its errors are those of parsing; -h/--help prints the
// usage to usage and returns flag.ErrHelp, as Load does.
func Preview(args []string, lookupEnv func(string) (string, bool), usage io.Writer, groups ...Group) (Config, error) {
	s, err := load(args, lookupEnv, usage, groups)
	if err != nil {
		return Config{}, err
	}
	return s.c, nil
}

// load applies every source to a new settings: default, file, environment, flags.
func load(args []string, lookupEnv func(string) (string, bool), usage io.Writer, groups []Group) (*settings, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	if usage == nil {
		usage = io.Discard
	}

	// Parse the flags once on their own, to report their errors first and to learn --config.
	scratch, err := newSettings(groups)
	if err != nil {
		return nil, err
	}
	fs, err := scratch.parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		scratch.printUsage(usage)
		return nil, flag.ErrHelp
	}
	if err != nil {
		return nil, err
	}
	file := scratch.c.ConfigFile
	if !isSet(fs, "config") {
		file, _ = lookupEnv(envName("config"))
	}

	// Then build the result from the lowest precedence up: default, file, environment, flags.
	s, err := newSettings(groups)
	if err != nil {
		return nil, err
	}
	if file != "" {
		s.newSource()
		if err := s.applyFile(file); err != nil {
			return nil, err
		}
	}
	s.newSource()
	for _, o := range s.all() {
		env := envName(o.Name)
		if v, ok := lookupEnv(env); ok {
			if err := o.Value.Set(v); err != nil {
				return nil, invalidValue(o.Name, v, "from "+env, err)
			}
		}
	}
	s.c.ConfigFile = file
	s.newSource()
	if _, err := s.parseFlags(args); err != nil {
		return nil, err // not reached: the same args parsed above
	}
	return s, nil
}

// settings is a Config under construction with every option bound to it: the core table, then
// each group's options under its title.
type settings struct {
	c      Config
	core   []Option
	groups []titled
}

type titled struct {
	title   string
	options []Option
}

// newSettings binds the core options and those of groups to a new Config, at their defaults.
// An option name declared twice is an error.
func newSettings(groups []Group) (*settings, error) {
	s := &settings{}
	s.core = coreOptions(&s.c)
	for _, g := range groups {
		s.groups = append(s.groups, titled{g.Title(), g.bind(&s.c)})
	}
	seen := map[string]bool{}
	for _, o := range s.all() {
		if seen[o.Name] {
			return nil, fmt.Errorf("config: option --%s is declared twice", o.Name)
		}
		seen[o.Name] = true
		if err := setDefault(o); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// setDefault sets o to its default.
func setDefault(o Option) error {
	if o.Default == "" {
		return nil
	}
	if err := o.Value.Set(o.Default); err != nil {
		return fmt.Errorf("config: bad default %q for --%s: %w", o.Default, o.Name, err)
	}
	return nil
}

// all lists every option: the core ones first, then each group's.
func (s *settings) all() []Option {
	out := append([]Option(nil), s.core...)
	for _, g := range s.groups {
		out = append(out, g.options...)
	}
	return out
}

// newSource tells the values that what follows comes from another source (see listValue).
func (s *settings) newSource() {
	for _, o := range s.all() {
		if v, ok := o.Value.(interface{ newSource() }); ok {
			v.newSource()
		}
	}
}

// lookup returns the option named name.
func (s *settings) lookup(name string) (Option, bool) {
	for _, o := range s.all() {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// setError records the first failed Set of a flag, so that Load can report it in its own words
// rather than the flag package's.
type setError struct{ err error }

// trackedValue wraps a value to record a failed Set into errp.
type trackedValue struct {
	Value
	name string
	errp *setError
}

func (v trackedValue) Set(s string) error {
	err := v.Value.Set(s)
	if err != nil && v.errp.err == nil {
		v.errp.err = invalidValue(v.name, s, "", err)
	}
	return err
}

// parseFlags parses args into s's Config. It returns the FlagSet (for Visit) and an error naming
// the flag. It prints nothing.
func (s *settings) parseFlags(args []string) (*flag.FlagSet, error) {
	fs := flag.NewFlagSet("shardkeeper serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var setErr setError
	for _, o := range s.all() {
		fs.Var(trackedValue{Value: o.Value, name: o.Name, errp: &setErr}, o.Name, o.Usage)
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return fs, err
	case setErr.err != nil:
		return fs, setErr.err
	case err != nil:
		return fs, fmt.Errorf("%w (see --help)", err)
	case fs.NArg() > 0:
		return fs, fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	return fs, nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// invalidValue is the error for a value that does not parse: it names the flag and, in from,
// where the value came from when it was not the command line.
func invalidValue(name, s, from string, err error) error {
	if from != "" {
		return fmt.Errorf("invalid value %q for --%s (%s): %w", s, name, from, err)
	}
	return fmt.Errorf("invalid value %q for --%s: %w", s, name, err)
}

// printUsage writes the help text of `shardkeeper serve` to w: the core flags, then each
// group's under its title.
func (s *settings) printUsage(w io.Writer) {
	var b bytes.Buffer
	b.WriteString("Usage: shardkeeper serve [flags]\n\n")
	b.WriteString("Each flag can also be set by the environment variable " + envPrefix + "<FLAG> (upper case,\n")
	b.WriteString("'-' replaced by '_') or by a key of the same name in the YAML file given by --config.\n")
	b.WriteString("Precedence: flag > environment > file > default. Durations use Go syntax (1500ms, 5m).\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	list := func(heading string, opts []Option) {
		fmt.Fprintf(tw, "%s:\n", heading)
		for _, o := range opts {
			def := ""
			switch {
			case o.DefaultText != "":
				def = " (default: " + o.DefaultText + ")"
			case o.Default != "":
				def = fmt.Sprintf(" (default %q)", o.Default)
			}
			fmt.Fprintf(tw, "  --%s %s\t%s\t%s%s\n", o.Name, o.Value.Type(), envName(o.Name), o.Usage, def)
		}
	}
	list("Flags", s.core)
	for _, g := range s.groups {
		fmt.Fprintln(tw)
		list("Flags of the "+g.title, g.options)
	}
	_ = tw.Flush()
	_, _ = w.Write(b.Bytes())
}
