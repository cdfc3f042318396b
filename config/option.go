package config

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Option is one setting: the flag --<Name>, the environment variable SHARDKEEPER_<NAME> and the
// YAML key <Name>, all three parsed by Value.Set from the same syntax.
type Option struct {
	Name string
	// Default is the value in flag syntax; "" keeps the field's zero value.
	Default string
	// DefaultText, when set, is what --help shows as the default instead of Default: for a
	// default computed at start, such as the host name.
	DefaultText string
	Usage       string
	Value       Value
	// NoFile keeps the option out of the YAML file (--config itself).
	NoFile bool
	// Secret marks an option whose value is a secret itself, not a file's path: a config file
	// that sets it must be readable by its owner only (see HoldsSecret).
	Secret bool
	// Check, when set, validates the loaded value; Load reports its error as
	// `invalid --<Name>: <error>`.
	Check func() error
}

// Checked returns o with check as its Check.
func (o Option) Checked(check func() error) Option {
	o.Check = check
	return o
}

// AsSecret returns o marked Secret.
func (o Option) AsSecret() Option {
	o.Secret = true
	return o
}

// HoldsSecret reports whether o's value is a secret: o is marked Secret, or named *-token,
// the convention of every bearer token option (--admin-token, --chain-token, …; their
// *-token-file companions hold a path, not the token).
func (o Option) HoldsSecret() bool { return o.Secret || strings.HasSuffix(o.Name, "-token") }

// Value is a flag.Value bound to one field. Type names the value's syntax in --help.
type Value interface {
	flag.Value
	Type() string
}

// String is an option setting *p.
func String(p *string, name, def, usage string) Option {
	return Option{Name: name, Default: def, Usage: usage, Value: stringValue{p}}
}

// Int is an option setting *p: a decimal (or 0x… hexadecimal) integer.
func Int(p *int, name, def, usage string) Option {
	return Option{Name: name, Default: def, Usage: usage, Value: intValue{p}}
}

// Uint64 is an option setting *p: a non-negative integer.
func Uint64(p *uint64, name, def, usage string) Option {
	return Option{Name: name, Default: def, Usage: usage, Value: uint64Value{p}}
}

// Duration is an option setting *p, in Go syntax (1500ms, 5m, 2160h).
func Duration(p *time.Duration, name, def, usage string) Option {
	return Option{Name: name, Default: def, Usage: usage, Value: durationValue{p}}
}

// List is an option setting *p: comma-separated values (entries trimmed, empty ones dropped);
// a repeated flag appends. kind names the entries' syntax in --help ("URL").
func List(p *[]string, name, kind, usage string) Option {
	return Option{Name: name, Usage: usage, Value: &listValue{p: p, kind: kind}}
}

// AtLeast is a Check that *p is at least n.
func AtLeast(p *int, n int) func() error {
	return func() error {
		if *p < n {
			return fmt.Errorf("must be at least %d, got %d", n, *p)
		}
		return nil
	}
}

// Positive is a Check that *p is more than zero.
func Positive(p *time.Duration) func() error {
	return func() error {
		if *p <= 0 {
			return fmt.Errorf("must be positive, got %s", *p)
		}
		return nil
	}
}

// The Value implementations. Set parses one value in flag syntax into the field; String formats
// the field back in the same syntax (and tolerates a zero value, as the flag package requires).

type stringValue struct{ p *string }

func (v stringValue) Set(s string) error { *v.p = s; return nil }
func (stringValue) Type() string         { return "string" }
func (v stringValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

type intValue struct{ p *int }

func (v intValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return numberError(err, "an integer")
	}
	*v.p = int(n)
	return nil
}
func (intValue) Type() string { return "int" }
func (v intValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

type uint64Value struct{ p *uint64 }

func (v uint64Value) Set(s string) error {
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return numberError(err, "a non-negative integer")
	}
	*v.p = n
	return nil
}
func (uint64Value) Type() string { return "uint" }
func (v uint64Value) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatUint(*v.p, 10)
}

// numberError says why a value is not a number of the kind what ("an integer"). strconv's own
// text ("strconv.ParseInt: parsing ...") names a Go function, which means nothing to an
// operator; the error keeps strconv's cause (ErrSyntax, ErrRange) for errors.Is.
func numberError(err error, what string) error {
	if errors.Is(err, strconv.ErrRange) {
		return &badNumber{msg: "out of range for " + what, cause: strconv.ErrRange}
	}
	return &badNumber{msg: "not " + what, cause: strconv.ErrSyntax}
}

type badNumber struct {
	msg   string
	cause error
}

func (e *badNumber) Error() string { return e.msg }
func (e *badNumber) Unwrap() error { return e.cause }

type durationValue struct{ p *time.Duration }

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.p = d
	return nil
}
func (durationValue) Type() string { return "duration" }
func (v durationValue) String() string {
	if v.p == nil {
		return "0s"
	}
	return v.p.String()
}

// listValue is a comma-separated list: entries are trimmed and empty ones dropped. The first Set
// from a source replaces the list, later ones from the same source append, so a repeated flag
// accumulates while a flag still replaces a list that came from the environment or the file.
type listValue struct {
	p    *[]string
	kind string // of an entry, for --help; "" is host:port
	set  bool   // set from the current source
}

// newSource makes the next Set replace the list.
func (v *listValue) newSource() { v.set = false }

func (v *listValue) Set(s string) error {
	var list []string
	if v.set {
		list = *v.p
	}
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			list = append(list, e)
		}
	}
	*v.p = list
	v.set = true
	return nil
}
func (v *listValue) Type() string {
	if v.kind != "" {
		return v.kind + ",..."
	}
	return "host:port,..."
}
func (v *listValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

// Bytes is an option setting *p: a size in bytes, with an optional unit B, KiB, MiB, GiB or
// TiB ("256MiB").
func Bytes(p *uint64, name, def, usage string) Option {
	return Option{Name: name, Default: def, Usage: usage, Value: bytesValue{p}}
}

var byteUnits = []struct {
	suffix string
	size   uint64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

type bytesValue struct{ p *uint64 }

func (v bytesValue) Set(s string) error {
	num, mult := s, uint64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.size
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || (n != 0 && n*mult/mult != n) {
		return fmt.Errorf("%q is not a size (a whole number with an optional unit B, KiB, MiB, GiB or TiB)", s)
	}
	*v.p = n * mult
	return nil
}
func (bytesValue) Type() string { return "size" }
func (v bytesValue) String() string {
	if v.p == nil || *v.p == 0 {
		return "0"
	}
	for _, u := range byteUnits {
		if *v.p%u.size == 0 {
			return strconv.FormatUint(*v.p/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatUint(*v.p, 10)
}

// Bool is an option setting *p: true or false (a flag given alone is true).
func Bool(p *bool, name, def, usage string) Option {
	return Option{Name: name, Default: def, Usage: usage, Value: boolValue{p}}
}

type boolValue struct{ p *bool }

func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("true or false is expected, not %q", s)
	}
	*v.p = b
	return nil
}
func (boolValue) Type() string     { return "bool" }
func (boolValue) IsBoolFlag() bool { return true }
func (v boolValue) String() string {
	if v.p == nil {
		return "false"
	}
	return strconv.FormatBool(*v.p)
}
