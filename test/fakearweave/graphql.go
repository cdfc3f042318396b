package fakearweave

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// POST /graphql is a gateway's Arweave GraphQL API (ar.io's schema), for what a client that
// lists transactions needs: Query.transactions with every filter of the schema (ids, owners,
// recipients, tags, bundledIn, block) but the NEQ tag operator, first/after pagination and
// both sort orders; Query.transaction(id); every field of Transaction and of the types under
// it; aliases and __typename. Fragments, directives and Query.block(s) are refused with an
// error that says so.
//
// What it answers, as an ar.io gateway does:
//   - Transactions the node took, mined (with their block) or pending (block null), and the
//     data items of the bundles it mined and indexed (bundledIn set), each item once. A
//     transaction dropped (evicted, expired, or in a block a reorg replaced) is no longer
//     listed.
//   - bundledIn absent lists both kinds, bundledIn: null transactions only, a list of ids the
//     items of those bundles only.
//   - Filters: a transaction matches every filter given, and any value of one; a tag filter
//     matches a tag of that name with any of the values (exact bytes, as UTF-8).
//   - HEIGHT_DESC (the default): pending first (the newest taken first), then by height,
//     place in the block and item id, all descending; HEIGHT_ASC the reverse.
//   - first: 10 by default, at most 100 (the bound the schema documents and arweave.net
//     enforces; ar.io's own resolver allows 1000). A cursor is ar.io's: base64url of the JSON
//     [height, place in block, is a data item, id, order taken]; a page after one holds what
//     sorts after it, so a transaction mined between two pages is seen again, never missed.
//   - Errors in Apollo Server's shape: {"errors": [{"message", "locations", "extensions":
//     {"code"}}]}, 400 for a query that does not parse or validate, 200 with "data": null
//     for one that fails while it runs (an invalid cursor).

const (
	gqlDefaultFirst = 10
	gqlMaxFirst     = 100
)

// gqlSchema holds each object type's fields and their types, as ar.io's schema writes them.
var gqlSchema = map[string]map[string]string{
	"Query":                 {"transactions": "TransactionConnection!", "transaction": "Transaction", "block": "Block", "blocks": "BlockConnection!"},
	"TransactionConnection": {"pageInfo": "PageInfo!", "edges": "[TransactionEdge!]!"},
	"PageInfo":              {"hasNextPage": "Boolean!"},
	"TransactionEdge":       {"cursor": "String!", "node": "Transaction!"},
	"Transaction": {"id": "ID!", "anchor": "String!", "signature": "String!", "signatureType": "Int", "recipient": "String!",
		"owner": "Owner!", "fee": "Amount!", "quantity": "Amount!", "data": "MetaData!", "tags": "[Tag!]!", "block": "Block",
		"parent": "Parent", "bundledIn": "Bundle"},
	"Owner":    {"address": "String!", "key": "String!"},
	"Amount":   {"winston": "String!", "ar": "String!"},
	"MetaData": {"size": "String!", "type": "String"},
	"Tag":      {"name": "String!", "value": "String!"},
	"Block":    {"id": "ID!", "timestamp": "Int!", "height": "Int!", "previous": "ID!"},
	"Parent":   {"id": "ID!"},
	"Bundle":   {"id": "ID!"},
}

var gqlArgs = map[string][]string{
	"Query.transactions": {"ids", "owners", "recipients", "tags", "bundledIn", "block", "first", "after", "sort", "parent"},
	"Query.transaction":  {"id"},
}

// gqlBase is a type without its list and non-null marks.
func gqlBase(t string) string { return strings.Trim(t, "[]!") }

func (f *Fake) graphql(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query         string         `json:"query"`
		Variables     map[string]any `json:"variables"`
		OperationName string         `json:"operationName"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil || req.Query == "" {
		gqlFail(w, http.StatusBadRequest, "BAD_REQUEST", &gqlError{msg: `POST body must be a JSON object with a "query" string.`})
		return
	}
	ops, err := parseGraphQL(req.Query)
	if err != nil {
		gqlFail(w, http.StatusBadRequest, "GRAPHQL_PARSE_FAILED", err)
		return
	}
	plan, err := gqlPlanOf(ops, req.OperationName, req.Variables)
	if err != nil {
		gqlFail(w, http.StatusBadRequest, "GRAPHQL_VALIDATION_FAILED", err)
		return
	}
	data, err := f.gqlRun(plan)
	if err != nil {
		gqlFail(w, http.StatusOK, "BAD_USER_INPUT", err)
		return
	}
	writeJSON(w, http.StatusOK, gqlOut{{"data", data}})
}

func gqlFail(w http.ResponseWriter, status int, code string, err error) {
	e, ok := err.(*gqlError)
	if !ok {
		e = &gqlError{msg: err.Error()}
	}
	j := gqlOut{{"message", e.msg}}
	if e.line > 0 {
		j = append(j, gqlKV{"locations", []gqlOut{{{"line", e.line}, {"column", e.col}}}})
	}
	if e.path != nil {
		j = append(j, gqlKV{"path", e.path})
	}
	j = append(j, gqlKV{"extensions", gqlOut{{"code", code}}})
	body := gqlOut{{"errors", []gqlOut{j}}}
	if status == http.StatusOK {
		body = append(body, gqlKV{"data", nil})
	}
	writeJSON(w, status, body)
}

// gqlOut is a JSON object whose keys keep their order, as GraphQL answers in the order of the
// selection.
type (
	gqlOut []gqlKV
	gqlKV  struct {
		k string
		v any
	}
)

func (o gqlOut) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.k)
		v, err := json.Marshal(kv.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// gqlStep is a field of Query to answer, its arguments read.
type gqlStep struct {
	field *gqlField
	txs   *gqlTxQuery // transactions
	id    string      // transaction
}

// gqlPlanOf picks the operation, reads the variables, validates the selection against the
// schema and reads Query's arguments: every error here is the request's (400).
func gqlPlanOf(ops []*gqlOperation, name string, given map[string]any) ([]gqlStep, error) {
	var op *gqlOperation
	for _, o := range ops {
		if name == "" && len(ops) == 1 || name != "" && o.name == name {
			op = o
		}
	}
	if op == nil {
		if name == "" {
			return nil, &gqlError{msg: "Must provide operation name if query contains multiple operations."}
		}
		return nil, &gqlError{msg: fmt.Sprintf("Unknown operation named %q.", name)}
	}
	vars, err := gqlVariables(op, given)
	if err != nil {
		return nil, err
	}
	sel, err := gqlCheck("Query", op.sel)
	if err != nil {
		return nil, err
	}
	var plan []gqlStep
	for _, fl := range sel {
		step := gqlStep{field: fl}
		args := map[string]any{}
		for _, a := range fl.args {
			v, present, err := gqlSubstitute(a.val, vars)
			if err != nil {
				return nil, &gqlError{msg: err.Error(), line: a.line, col: a.col}
			}
			if present {
				args[a.name] = v
			}
		}
		switch fl.name {
		case "transactions":
			if step.txs, err = gqlTxQueryOf(args); err != nil {
				return nil, &gqlError{msg: err.Error(), line: fl.line, col: fl.col}
			}
		case "transaction":
			id, ok := args["id"].(string)
			if !ok {
				return nil, &gqlError{msg: `Field "transaction" argument "id" of type "ID!" is required, but it was not provided.`, line: fl.line, col: fl.col}
			}
			step.id = id
		}
		plan = append(plan, step)
	}
	return plan, nil
}

// gqlVariables gives each variable the operation defines its value: the one given, else its
// default; one neither given nor defaulted is absent (nil in the map: present but null is a
// value). Values from JSON become the parser's (int64, gqlObjectValue...).
func gqlVariables(op *gqlOperation, given map[string]any) (map[string]*any, error) {
	vars := map[string]*any{}
	for _, d := range op.vars {
		if v, ok := given[d.name]; ok {
			v = gqlFromJSON(v)
			vars[d.name] = &v
		} else if d.hasDefault {
			v := d.def
			vars[d.name] = &v
		} else if d.nonNull {
			return nil, &gqlError{msg: fmt.Sprintf("Variable \"$%s\" of required type %q was not provided.", d.name, d.typ)}
		} else {
			vars[d.name] = nil
		}
	}
	return vars, nil
}

func gqlFromJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		n, _ := x.Float64()
		return n
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = gqlFromJSON(e)
		}
		return out
	case map[string]any:
		out := gqlObjectValue{}
		for k, e := range x {
			out[k] = gqlFromJSON(e)
		}
		return out
	}
	return v
}

// gqlSubstitute replaces the variables in v by their values; present is false for a variable
// with no value (the argument is then absent).
func gqlSubstitute(v any, vars map[string]*any) (any, bool, error) {
	switch x := v.(type) {
	case gqlVar:
		val, defined := vars[x.name]
		if !defined {
			return nil, false, gqlErrf("Variable \"$%s\" is not defined.", x.name)
		}
		if val == nil {
			return nil, false, nil
		}
		return *val, true, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			s, _, err := gqlSubstitute(e, vars)
			if err != nil {
				return nil, false, err
			}
			out[i] = s
		}
		return out, true, nil
	case gqlObjectValue:
		out := gqlObjectValue{}
		for k, e := range x {
			s, present, err := gqlSubstitute(e, vars)
			if err != nil {
				return nil, false, err
			}
			if present {
				out[k] = s
			}
		}
		return out, true, nil
	}
	return v, true, nil
}

// gqlCheck validates a selection on typ and merges the fields asked twice under one name.
func gqlCheck(typ string, sel []*gqlField) ([]*gqlField, error) {
	var out []*gqlField
	byKey := map[string]*gqlField{}
	for _, fl := range sel {
		key := fl.alias
		if key == "" {
			key = fl.name
		}
		if g, ok := byKey[key]; ok {
			if g.name != fl.name {
				return nil, &gqlError{msg: fmt.Sprintf("Fields %q conflict because %q and %q are different fields.", key, g.name, fl.name), line: fl.line, col: fl.col}
			}
			g.sel = append(g.sel, fl.sel...)
			continue
		}
		c := *fl
		byKey[key] = &c
		out = append(out, &c)
	}
	for _, fl := range out {
		if fl.name == "__typename" {
			if fl.sel != nil || fl.args != nil {
				return nil, &gqlError{msg: `Field "__typename" takes no arguments and has no subfields.`, line: fl.line, col: fl.col}
			}
			continue
		}
		ft, ok := gqlSchema[typ][fl.name]
		if !ok {
			return nil, &gqlError{msg: fmt.Sprintf("Cannot query field %q on type %q.", fl.name, typ), line: fl.line, col: fl.col}
		}
		if typ == "Query" && (fl.name == "block" || fl.name == "blocks") {
			return nil, &gqlError{msg: fmt.Sprintf("Query.%s is not served by this fake node.", fl.name), line: fl.line, col: fl.col}
		}
		for _, a := range fl.args {
			if !slices.Contains(gqlArgs[typ+"."+fl.name], a.name) {
				return nil, &gqlError{msg: fmt.Sprintf("Unknown argument %q on field \"%s.%s\".", a.name, typ, fl.name), line: a.line, col: a.col}
			}
		}
		_, object := gqlSchema[gqlBase(ft)]
		switch {
		case !object && fl.sel != nil:
			return nil, &gqlError{msg: fmt.Sprintf("Field %q must not have a selection since type %q has no subfields.", fl.name, ft), line: fl.line, col: fl.col}
		case object && fl.sel == nil:
			return nil, &gqlError{msg: fmt.Sprintf("Field %q of type %q must have a selection of subfields. Did you mean \"%s { ... }\"?", fl.name, ft, fl.name), line: fl.line, col: fl.col}
		case object:
			var err error
			if fl.sel, err = gqlCheck(gqlBase(ft), fl.sel); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
