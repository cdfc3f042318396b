package fakearweave

import (
	"fmt"
	"strconv"
	"strings"
)

// A parser of the GraphQL query language (the October 2021 specification), for the subset
// gateways' clients send: one or more operations (query keyword or shorthand), variable
// definitions with defaults, fields with aliases, arguments and selection sets, and every
// kind of input value. Fragments, directives, mutations and subscriptions are refused with
// an error that says so; block strings are not read.

// gqlError is an error of the request, with where in the query it is.
type gqlError struct {
	msg       string
	line, col int
	path      []string
}

func (e *gqlError) Error() string { return e.msg }

// gqlErrf is an error worded as GraphQL servers word theirs (capitalized sentences).
func gqlErrf(format string, a ...any) error { return &gqlError{msg: fmt.Sprintf(format, a...)} }

// The parsed document.
type (
	gqlOperation struct {
		name string
		vars []gqlVarDef
		sel  []*gqlField
	}
	gqlVarDef struct {
		name       string
		typ        string // as written, e.g. "[String!]"
		nonNull    bool
		def        any
		hasDefault bool
	}
	gqlField struct {
		alias, name string
		args        []gqlArg
		sel         []*gqlField // nil: none
		line, col   int
	}
	gqlArg struct {
		name      string
		val       any // see value
		line, col int
	}
	gqlVar  struct{ name string }
	gqlEnum string
	// gqlObjectValue keeps an input object's fields; a field given twice is an error.
	gqlObjectValue map[string]any
)

type gqlParser struct {
	lex gqlLexer
	tok gqlToken
}

func parseGraphQL(src string) ([]*gqlOperation, error) {
	p := &gqlParser{lex: gqlLexer{src: src, line: 1, col: 1}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	var ops []*gqlOperation
	for p.tok.kind != 0 {
		op, err := p.operation()
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	if len(ops) == 0 {
		return nil, p.unexpected()
	}
	return ops, nil
}

func (p *gqlParser) advance() error {
	t, err := p.lex.next()
	p.tok = t
	return err
}

func (p *gqlParser) unexpected() *gqlError {
	what := "<EOF>"
	switch p.tok.kind {
	case 'p':
		what = `"` + p.tok.val + `"`
	case 'n':
		what = `Name "` + p.tok.val + `"`
	case 'i', 'f':
		what = p.tok.val
	case 's':
		what = strconv.Quote(p.tok.val)
	}
	return p.lex.errf(p.tok.line, p.tok.col, "Unexpected %s.", what)
}

func (p *gqlParser) is(val string) bool { return p.tok.kind == 'p' && p.tok.val == val }

func (p *gqlParser) expect(val string) error {
	if !p.is(val) {
		if p.tok.kind == 0 || p.tok.kind == 'p' {
			return p.lex.errf(p.tok.line, p.tok.col, "Expected %q, found %s.", val, strings.TrimPrefix(p.unexpected().msg, "Syntax Error: Unexpected "))
		}
		return p.unexpected()
	}
	return p.advance()
}

func (p *gqlParser) name() (string, error) {
	if p.tok.kind != 'n' {
		return "", p.unexpected()
	}
	v := p.tok.val
	return v, p.advance()
}

func (p *gqlParser) unsupported(what string) *gqlError {
	return &gqlError{msg: what + " are not supported by this fake node.", line: p.tok.line, col: p.tok.col}
}

func (p *gqlParser) operation() (*gqlOperation, error) {
	op := &gqlOperation{}
	if p.is("{") {
		sel, err := p.selectionSet()
		op.sel = sel
		return op, err
	}
	if p.tok.kind != 'n' {
		return nil, p.unexpected()
	}
	switch p.tok.val {
	case "query":
	case "mutation", "subscription":
		return nil, p.unsupported("Mutations and subscriptions")
	case "fragment":
		return nil, p.unsupported("Fragments")
	default:
		return nil, p.unexpected()
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == 'n' {
		op.name = p.tok.val
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if p.is("(") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		for !p.is(")") {
			v, err := p.varDef()
			if err != nil {
				return nil, err
			}
			op.vars = append(op.vars, v)
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if p.is("@") {
		return nil, p.unsupported("Directives")
	}
	sel, err := p.selectionSet()
	op.sel = sel
	return op, err
}

func (p *gqlParser) varDef() (gqlVarDef, error) {
	var v gqlVarDef
	if err := p.expect("$"); err != nil {
		return v, err
	}
	var err error
	if v.name, err = p.name(); err != nil {
		return v, err
	}
	if err := p.expect(":"); err != nil {
		return v, err
	}
	if v.typ, err = p.typeRef(); err != nil {
		return v, err
	}
	v.nonNull = strings.HasSuffix(v.typ, "!")
	if p.is("=") {
		if err := p.advance(); err != nil {
			return v, err
		}
		if v.def, err = p.value(true); err != nil {
			return v, err
		}
		v.hasDefault = true
	}
	if p.is("@") {
		return v, p.unsupported("Directives")
	}
	return v, nil
}

func (p *gqlParser) typeRef() (string, error) {
	var t string
	if p.is("[") {
		if err := p.advance(); err != nil {
			return "", err
		}
		inner, err := p.typeRef()
		if err != nil {
			return "", err
		}
		if err := p.expect("]"); err != nil {
			return "", err
		}
		t = "[" + inner + "]"
	} else {
		n, err := p.name()
		if err != nil {
			return "", err
		}
		t = n
	}
	if p.is("!") {
		if err := p.advance(); err != nil {
			return "", err
		}
		t += "!"
	}
	return t, nil
}

func (p *gqlParser) selectionSet() ([]*gqlField, error) {
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	var sel []*gqlField
	for !p.is("}") {
		if p.is("...") {
			return nil, p.unsupported("Fragments")
		}
		f, err := p.field()
		if err != nil {
			return nil, err
		}
		sel = append(sel, f)
	}
	if len(sel) == 0 {
		return nil, p.unexpected()
	}
	return sel, p.advance()
}

func (p *gqlParser) field() (*gqlField, error) {
	f := &gqlField{line: p.tok.line, col: p.tok.col}
	var err error
	if f.name, err = p.name(); err != nil {
		return nil, err
	}
	if p.is(":") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		f.alias = f.name
		if f.name, err = p.name(); err != nil {
			return nil, err
		}
	}
	if p.is("(") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		for !p.is(")") {
			a := gqlArg{line: p.tok.line, col: p.tok.col}
			if a.name, err = p.name(); err != nil {
				return nil, err
			}
			if err := p.expect(":"); err != nil {
				return nil, err
			}
			if a.val, err = p.value(false); err != nil {
				return nil, err
			}
			f.args = append(f.args, a)
		}
		if len(f.args) == 0 {
			return nil, p.unexpected()
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if p.is("@") {
		return nil, p.unsupported("Directives")
	}
	if p.is("{") {
		if f.sel, err = p.selectionSet(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// value reads an input value: gqlVar, int64, float64, string, bool, nil, gqlEnum, []any or
// gqlObjectValue. Constants (defaults) may not name variables.
func (p *gqlParser) value(constant bool) (any, error) {
	t := p.tok
	switch {
	case p.is("$") && !constant:
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.name()
		return gqlVar{n}, err
	case p.is("["):
		if err := p.advance(); err != nil {
			return nil, err
		}
		list := []any{}
		for !p.is("]") {
			v, err := p.value(constant)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, p.advance()
	case p.is("{"):
		if err := p.advance(); err != nil {
			return nil, err
		}
		obj := gqlObjectValue{}
		for !p.is("}") {
			line, col := p.tok.line, p.tok.col
			n, err := p.name()
			if err != nil {
				return nil, err
			}
			if err := p.expect(":"); err != nil {
				return nil, err
			}
			v, err := p.value(constant)
			if err != nil {
				return nil, err
			}
			if _, dup := obj[n]; dup {
				return nil, &gqlError{msg: fmt.Sprintf("There can be only one input field named %q.", n), line: line, col: col}
			}
			obj[n] = v
		}
		return obj, p.advance()
	case t.kind == 'i':
		n, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil {
			return nil, p.lex.errf(t.line, t.col, "Int cannot represent %s.", t.val)
		}
		return n, p.advance()
	case t.kind == 'f':
		n, _ := strconv.ParseFloat(t.val, 64)
		return n, p.advance()
	case t.kind == 's':
		return t.val, p.advance()
	case t.kind == 'n':
		var v any
		switch t.val {
		case "true", "false":
			v = t.val == "true"
		case "null":
			v = nil
		default:
			v = gqlEnum(t.val)
		}
		return v, p.advance()
	}
	return nil, p.unexpected()
}
