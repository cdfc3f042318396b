package fakearweave

// The arguments of Query.transactions, read into a query.

// gqlTxQuery is a transactions query's arguments, read.
type gqlTxQuery struct {
	ids, owners, recipients map[string]bool // nil: no filter
	tags                    []gqlTagFilter
	bundledIn               map[string]bool // items of these bundles only
	l1Only                  bool            // bundledIn: null
	minHeight, maxHeight    int             // -1: none
	first                   int
	after                   string
	asc                     bool
}

type gqlTagFilter struct {
	name   string
	values map[string]bool
}

func gqlTxQueryOf(args map[string]any) (*gqlTxQuery, error) {
	q := &gqlTxQuery{minHeight: -1, maxHeight: -1, first: gqlDefaultFirst}
	for _, name := range []string{"ids", "owners", "recipients"} {
		v, ok := args[name]
		if !ok || v == nil {
			continue
		}
		list, err := gqlStrings(name, v)
		if err != nil {
			return nil, err
		}
		set := map[string]bool{}
		for _, s := range list {
			set[s] = true
		}
		switch name {
		case "ids":
			q.ids = set
		case "owners":
			q.owners = set
		case "recipients":
			q.recipients = set
		}
	}
	// bundledIn, or the deprecated parent when bundledIn is absent (as ar.io reads them).
	in, given := args["bundledIn"]
	if !given {
		in, given = args["parent"]
	}
	if given {
		if in == nil {
			q.l1Only = true
		} else {
			list, err := gqlStrings("bundledIn", in)
			if err != nil {
				return nil, err
			}
			q.bundledIn = map[string]bool{}
			for _, s := range list {
				q.bundledIn[s] = true
			}
		}
	}
	if v, ok := args["tags"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			list = []any{v}
		}
		for _, t := range list {
			tf, err := gqlTagFilterOf(t)
			if err != nil {
				return nil, err
			}
			q.tags = append(q.tags, tf)
		}
	}
	if v, ok := args["block"]; ok && v != nil {
		obj, ok := v.(gqlObjectValue)
		if !ok {
			return nil, gqlErrf("Argument \"block\" has invalid value: a BlockFilter {min, max} expected.")
		}
		for k, e := range obj {
			n, ok := e.(int64)
			switch {
			case k != "min" && k != "max":
				return nil, gqlErrf("Field %q is not defined by type \"BlockFilter\".", k)
			case e == nil:
			case !ok:
				return nil, gqlErrf("Int cannot represent a non-integer value: BlockFilter.%s.", k)
			case k == "min":
				q.minHeight = int(n)
			default:
				q.maxHeight = int(n)
			}
		}
	}
	if v, ok := args["first"]; ok && v != nil {
		n, ok := v.(int64)
		if !ok {
			return nil, gqlErrf("Argument \"first\" has invalid value: Int expected.")
		}
		if n < 0 {
			return nil, gqlErrf("Argument \"first\" has invalid value %d: a page holds 0 or more transactions.", n)
		}
		q.first = int(min(n, gqlMaxFirst))
	}
	if v, ok := args["after"]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return nil, gqlErrf("Argument \"after\" has invalid value: String expected.")
		}
		q.after = s
	}
	if v, ok := args["sort"]; ok && v != nil {
		switch gqlEnumValue(v) {
		case "HEIGHT_DESC":
		case "HEIGHT_ASC":
			q.asc = true
		default:
			return nil, gqlErrf("Value %v does not exist in \"SortOrder\" enum.", v)
		}
	}
	return q, nil
}

// gqlEnumValue is an enum's name, written in the query or given as a variable's string.
func gqlEnumValue(v any) string {
	switch x := v.(type) {
	case gqlEnum:
		return string(x)
	case string:
		return x
	}
	return ""
}

// gqlStrings reads a [String!] argument; a single string stands for a list of one, as
// GraphQL's input coercion has it.
func gqlStrings(name string, v any) ([]string, error) {
	if s, ok := v.(string); ok {
		return []string{s}, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, gqlErrf("Argument %q has invalid value: a list of strings expected.", name)
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, gqlErrf("Argument %q has invalid value: a list of strings expected.", name)
		}
		out[i] = s
	}
	return out, nil
}

func gqlTagFilterOf(v any) (gqlTagFilter, error) {
	obj, ok := v.(gqlObjectValue)
	if !ok {
		return gqlTagFilter{}, gqlErrf("Argument \"tags\" has invalid value: TagFilter {name, values} expected.")
	}
	for k := range obj {
		if k != "name" && k != "values" && k != "op" {
			return gqlTagFilter{}, gqlErrf("Field %q is not defined by type \"TagFilter\".", k)
		}
	}
	name, ok := obj["name"].(string)
	if !ok {
		return gqlTagFilter{}, gqlErrf("Field \"TagFilter.name\" of required type \"String!\" was not provided.")
	}
	if obj["values"] == nil {
		return gqlTagFilter{}, gqlErrf("Field \"TagFilter.values\" of required type \"[String!]!\" was not provided.")
	}
	values, err := gqlStrings("values", obj["values"])
	if err != nil {
		return gqlTagFilter{}, err
	}
	if op, ok := obj["op"]; ok && op != nil && gqlEnumValue(op) != "EQ" {
		// ar.io's schema has NEQ but its resolver reads name and values only, which would
		// answer NEQ as EQ: refused here rather than answered wrong.
		return gqlTagFilter{}, gqlErrf("TagFilter op %v is not supported by this fake node (EQ only).", op)
	}
	tf := gqlTagFilter{name: name, values: map[string]bool{}}
	for _, s := range values {
		tf.values[s] = true
	}
	return tf, nil
}
