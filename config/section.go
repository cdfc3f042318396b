package config

import "maps"

// Group is a section of settings as Load takes it: a *Section of any type.
type Group interface {
	// Title names the section in --help, e.g. "device attestation registry".
	Title() string
	// bind stores a fresh value of the section, at its defaults, in c and returns its options
	// bound to that value.
	bind(c *Config) []Option
	// options returns the options bound to ptr, a value of the section stored in a Config.
	options(ptr any) []Option
}

// Section is a group of settings with a typed struct T of its own, such as one service's limits.
// Its options are declared once, bound to the fields of a T; Load parses them exactly like the
// core settings (flags, SHARDKEEPER_* environment, the YAML file, checks), and the result is
// kept in the Config, where Get reads it. A Config that never held the section (Default, or
// Load without it) reads as the section's defaults.
type Section[T any] struct {
	title string
	opts  func(*T) []Option
}

// NewSection declares a section titled title whose options, bound to the fields of a T, are
// opts(t).
func NewSection[T any](title string, opts func(*T) []Option) *Section[T] {
	return &Section[T]{title: title, opts: opts}
}

// Title implements Group.
func (s *Section[T]) Title() string { return s.title }

func (s *Section[T]) bind(c *Config) []Option {
	p := new(T)
	c.setSection(s, p)
	return s.opts(p)
}

func (s *Section[T]) options(ptr any) []Option { return s.opts(ptr.(*T)) }

// Get returns the section's settings in c.
func (s *Section[T]) Get(c Config) T {
	if v, ok := c.sections[s]; ok {
		return *v.(*T)
	}
	p := new(T)
	for _, o := range s.opts(p) {
		if err := setDefault(o); err != nil {
			panic(err) // the declaration is wrong, in every process
		}
	}
	return *p
}

// Set stores v as the section's settings in c. Configs copied from c before keep theirs.
func (s *Section[T]) Set(c *Config, v T) {
	p := new(T)
	*p = v
	c.setSection(s, p)
}

// Update changes the section's settings in c with f.
func (s *Section[T]) Update(c *Config, f func(*T)) {
	v := s.Get(*c)
	f(&v)
	s.Set(c, v)
}

// setSection stores ptr, a value of g, in c. The map is copied, never written in place, so
// that copies of a Config never share a change.
func (c *Config) setSection(g Group, ptr any) {
	m := make(map[Group]any, len(c.sections)+1)
	maps.Copy(m, c.sections)
	m[g] = ptr
	c.sections = m
}
