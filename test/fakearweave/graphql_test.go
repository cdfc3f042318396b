package fakearweave

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/arweave/ans104"
)

// gql posts a GraphQL request and returns the status and body.
func gql(t *testing.T, url, query string, vars map[string]any) (int, []byte) {
	t.Helper()
	return gqlOp(t, url, query, vars, "")
}

// gqlOp posts a GraphQL request naming the operation to run.
func gqlOp(t *testing.T, url, query string, vars map[string]any, op string) (int, []byte) {
	t.Helper()
	req := map[string]any{"query": query, "variables": vars}
	if op != "" {
		req["operationName"] = op
	}
	body, _ := json.Marshal(req)
	resp, err := http.Post(url+"/graphql", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

// page is the answer to walletQuery.
type page struct {
	Data struct {
		Transactions struct {
			PageInfo struct{ HasNextPage bool } `json:"pageInfo"`
			Edges    []struct {
				Cursor string `json:"cursor"`
				Node   struct {
					ID   string `json:"id"`
					Tags []struct {
						Name, Value string
					} `json:"tags"`
					Block *struct {
						Height int `json:"height"`
					} `json:"block"`
					BundledIn *struct {
						ID string `json:"id"`
					} `json:"bundledIn"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"transactions"`
	} `json:"data"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

// walletQuery is the query a client walks a wallet's transactions with (as ar-gql's all()).
const walletQuery = `query($owners: [String!], $tags: [TagFilter!], $in: [ID!], $first: Int, $cursor: String, $sort: SortOrder) {
  transactions(owners: $owners, tags: $tags, bundledIn: $in, first: $first, after: $cursor, sort: $sort) {
    pageInfo { hasNextPage }
    edges { cursor node { id tags { name value } block { height } bundledIn { id } } }
  }
}`

// walk follows the pages of walletQuery (vars without cursor) to the end, and returns the ids
// in order; between pages it calls between, if not nil.
func walk(t *testing.T, url string, vars map[string]any, between func()) []string {
	t.Helper()
	var ids []string
	for n := 0; ; n++ {
		if n == 200 {
			t.Fatalf("200 pages and more: the cursor does not advance (%d ids)", len(ids))
		}
		status, body := gql(t, url, walletQuery, vars)
		var p page
		if status != http.StatusOK || json.Unmarshal(body, &p) != nil || p.Errors != nil {
			t.Fatalf("page %d: %d %s", n, status, body)
		}
		edges := p.Data.Transactions.Edges
		if first, ok := vars["first"].(int); ok && len(edges) > first {
			t.Fatalf("page %d holds %d, first is %d", n, len(edges), first)
		}
		for _, e := range edges {
			ids = append(ids, e.Node.ID)
		}
		if !p.Data.Transactions.PageInfo.HasNextPage {
			return ids
		}
		if len(edges) == 0 {
			t.Fatalf("page %d: empty, and a next page", n)
		}
		vars["cursor"] = edges[len(edges)-1].Cursor
		if between != nil {
			between()
		}
	}
}

// A wallet's transactions, walked page by page with the owners filter: every one once, in the
// gateways' order (pending first, newest first), and only its own; filters by tags and
// bundle; both sort orders; a reorg's dropped transactions gone.
func TestGraphQLWalletTransactions(t *testing.T) {
	f, c, url := startWith(t, Config{Manual: true, MaxBlockTxs: 4})
	a := wallet(t)
	b, err := arweave.GenerateWallet(2048)
	if err != nil {
		t.Fatal(err)
	}
	rsa, err := ans104.NewArweaveSigner(a)
	if err != nil {
		t.Fatal(err)
	}
	// A posts 11 (5 of them bundles, one holding an item A signed), B 3, interleaved; the last
	// two are A's and stay pending (4 a block, 3 blocks).
	var mine, bundles, all []string
	ownItem := item(t, rsa, "signed by the wallet too", "App-Name", "shardkeeper")
	for i := range 14 {
		var tx *arweave.Tx
		switch {
		case i%5 == 1:
			tx = signed(t, c, b, 10+i, nil)
		case i%3 == 0 || i == 8:
			items := []*ans104.DataItem{item(t, edSigner(t, byte(i)), fmt.Sprint("event ", i))}
			if i == 3 {
				items = append(items, ownItem)
			}
			tx = bundleTx(t, c, a, encode(t, items...), nil)
			bundles = append(bundles, tx.IDString())
		default:
			tx = signed(t, c, a, 10+i, nil)
		}
		post(t, c, tx)
		all = append(all, tx.IDString())
		if !bytes.Equal(tx.Owner, b.Owner()) {
			mine = append(mine, tx.IDString())
		}
	}
	if len(mine) != 11 || len(bundles) != 5 || all[13] != mine[10] || all[12] != mine[9] {
		t.Fatalf("setup: %d of A's, %d bundles", len(mine), len(bundles))
	}
	for range 3 {
		f.Mine()
	}
	newestFirst := slices.Clone(mine)
	slices.Reverse(newestFirst)

	owners := []string{a.Address()}
	for _, first := range []int{1, 3, 10, 100} {
		got := walk(t, url, map[string]any{"owners": owners, "in": nil, "first": first}, nil)
		if !slices.Equal(got, newestFirst) {
			t.Fatalf("first %d: %d ids %v\nwant %d %v", first, len(got), got, len(newestFirst), newestFirst)
		}
	}
	// Pending first, with no block; then mined, heights descending.
	_, body := gql(t, url, walletQuery, map[string]any{"owners": owners, "in": nil, "first": 4})
	var p page
	_ = json.Unmarshal(body, &p)
	if e := p.Data.Transactions.Edges; e[0].Node.Block != nil || e[1].Node.Block != nil || e[2].Node.Block == nil || e[2].Node.Block.Height != 3 {
		t.Fatalf("first page: %s", body)
	}
	asc := walk(t, url, map[string]any{"owners": owners, "in": nil, "first": 5, "sort": "HEIGHT_ASC"}, nil)
	if !slices.Equal(asc, mine) {
		t.Fatalf("HEIGHT_ASC: %v", asc)
	}
	// Without bundledIn: null, the items the wallet signed are listed too.
	withItems := walk(t, url, map[string]any{"owners": owners, "first": 7}, nil)
	if len(withItems) != 12 || !slices.Contains(withItems, ownItem.IDString()) {
		t.Fatalf("with data items: %v", withItems)
	}
	// By tag: the bundles alone.
	tagged := walk(t, url, map[string]any{"owners": owners, "first": 2,
		"tags": []map[string]any{{"name": "Bundle-Format", "values": []string{"binary"}}, {"name": "Bundle-Version", "values": []string{"2.0.0", "1.0.0"}}}}, nil)
	slices.Reverse(tagged)
	if !slices.Equal(tagged, bundles) {
		t.Fatalf("tagged Bundle-Format: %v, want %v", tagged, bundles)
	}
	// The items of given bundles; the bundle holding two items lists both.
	inBundle := walk(t, url, map[string]any{"in": []string{bundles[0], bundles[1]}, "first": 10}, nil)
	if len(inBundle) != 3 || !slices.Contains(inBundle, ownItem.IDString()) {
		t.Fatalf("bundledIn: %v", inBundle)
	}
	// The other wallet's.
	if theirs := walk(t, url, map[string]any{"owners": []string{b.Address()}, "first": 10}, nil); len(theirs) != 3 {
		t.Fatalf("B's: %v", theirs)
	}

	// Mined between two pages: seen again, never missed.
	seen := walk(t, url, map[string]any{"owners": owners, "in": nil, "first": 1}, func() { f.Mine() })
	for _, id := range mine {
		if !slices.Contains(seen, id) {
			t.Fatalf("%s missed while blocks were mined between pages: %v", id, seen)
		}
	}

	// A reorg from block 4 on (where the two pending ones were mined, between the pages):
	// they are no longer listed, the others are.
	dropped := f.Reorg(f.Height() - 3)
	if !slices.Equal(dropped, mine[9:]) {
		t.Fatalf("the reorg dropped %v, want %v", dropped, mine[9:])
	}
	after := walk(t, url, map[string]any{"owners": owners, "in": nil, "first": 100}, nil)
	if !slices.Equal(after, newestFirst[2:]) {
		t.Fatalf("after the reorg: %v, want %v", after, newestFirst[2:])
	}
}

// shape is a JSON document's structure: objects with their keys in order, arrays element by
// element, and leaves by kind.
func shape(t *testing.T, doc []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	var walk func() string
	walk = func() string {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%v in %s", err, doc)
		}
		switch v := tok.(type) {
		case json.Delim:
			var parts []string
			for dec.More() {
				if v == '{' {
					k, _ := dec.Token()
					parts = append(parts, k.(string)+":"+walk())
				} else {
					parts = append(parts, walk())
				}
			}
			_, _ = dec.Token()
			if v == '{' {
				return "{" + strings.Join(parts, ",") + "}"
			}
			return "[" + strings.Join(parts, ",") + "]"
		case string:
			return "string"
		case float64:
			return "number"
		case bool:
			return "bool"
		}
		return "null"
	}
	return walk()
}

// The answer has the shape of arweave.net's to the same query (below as recorded, the values
// shortened): a pending transaction then a mined one; the cursor is ar.io's.
func TestGraphQLRecordedShape(t *testing.T) {
	const recorded = `{"data":{"transactions":{"pageInfo":{"hasNextPage":true},"edges":[
	 {"cursor":"WyIyMDI0LTA3LTAxIiwxXQ","node":{"id":"gWe4lUrdWkqLhGzHSgXzwFBRbuZmBHCk4NDGTC3j8DQ","tags":[{"name":"App-Name","value":"ArDrive-App"}],"block":null}},
	 {"cursor":"WzE0NzUwMDQsMCxmYWxzZSwiLi4uIixudWxsXQ","node":{"id":"T9gCRvKQ6u8ivhu1Cp-uu-HgjsL1OzDp-pMaeZDADR0","tags":[{"name":"Content-Type","value":"image/png"},{"name":"App-Name","value":"x"}],"block":{"height":1475004}}}]}}}`
	f, c, url := start(t)
	w := wallet(t)
	mined := signedData(t, c, w, []byte("png"), []arweave.Tag{{Name: []byte("Content-Type"), Value: []byte("image/png")}, {Name: []byte("App-Name"), Value: []byte("x")}}, nil)
	post(t, c, mined)
	f.Mine()
	post(t, c, signed(t, c, w, 10, nil))
	status, body := gql(t, url, `query { transactions(owners: ["`+w.Address()+`"], first: 2, sort: HEIGHT_DESC) {
	  pageInfo { hasNextPage } edges { cursor node { id tags { name value } block { height } } } } }`, nil)
	if got, want := shape(t, body), shape(t, []byte(recorded)); status != http.StatusOK || got != want {
		t.Fatalf("shape\n%s\nwant\n%s\n(%d %s)", got, want, status, body)
	}
	var p page
	_ = json.Unmarshal(body, &p)
	e := p.Data.Transactions.Edges
	if e[1].Node.ID != mined.IDString() || e[1].Node.Block.Height != 1 || len(e[1].Node.Tags) != 2 || e[1].Node.Tags[0].Value != "image/png" {
		t.Fatalf("values: %s", body)
	}
	// The cursor is ar.io's [height, place in block, is a data item, id, order taken].
	raw, err := b64.DecodeString(e[1].Cursor)
	if err != nil || string(raw) != fmt.Sprintf(`[1,0,false,%q,null]`, mined.IDString()) {
		t.Fatalf("cursor %s: %v", raw, err)
	}
}

// A node: every field of a transaction and of a data item, with aliases and __typename.
func TestGraphQLFields(t *testing.T) {
	f, c, url := start(t)
	w := wallet(t)
	d := item(t, edSigner(t, 9), "{}", "Content-Type", "application/json")
	tx := bundleTx(t, c, w, encode(t, d), nil)
	post(t, c, tx)
	f.Mine()
	const fields = `__typename id anchor signature signatureType recipient owner { address key } fee { winston ar }
	  quantity { winston ar } data { size type } tags { name value } block { id height previous timestamp } bundledIn { id } parent { id }`
	status, body := gql(t, url, `query Q($id: ID!, $item: ID!) {
	  __typename
	  bundle: transaction(id: $id) { `+fields+` }
	  item: transaction(id: $item) { `+fields+` }
	  none: transaction(id: "x") { id }
	}`, map[string]any{"id": tx.IDString(), "item": d.IDString()})
	var got struct {
		Data struct {
			Typename string `json:"__typename"`
			Bundle   map[string]any
			Item     map[string]any
			None     any
		}
	}
	if status != http.StatusOK || json.Unmarshal(body, &got) != nil || got.Data.Typename != "Query" || got.Data.None != nil {
		t.Fatalf("%d %s", status, body)
	}
	bundle, it := got.Data.Bundle, got.Data.Item
	// The default price of one chunk: 100000 + 262144000 winston.
	fee, wantFee := fmt.Sprint(bundle["fee"]), "map[ar:0.000262244 winston:262244000]"
	if bundle["__typename"] != "Transaction" || bundle["id"] != tx.IDString() || bundle["anchor"] != b64.EncodeToString(tx.LastTx) ||
		bundle["signatureType"] != 1.0 || bundle["recipient"] != "" || fee != wantFee ||
		fmt.Sprint(bundle["owner"]) != fmt.Sprintf("map[address:%s key:%s]", w.Address(), b64.EncodeToString(w.Owner())) ||
		bundle["bundledIn"] != nil || bundle["parent"] != nil {
		t.Fatalf("the bundle: %v (fee %s, want %s)", bundle, fee, wantFee)
	}
	block := bundle["block"].(map[string]any)
	if block["height"] != 1.0 || block["previous"] != blockAt(t, url, 0).Hash || block["id"] != blockAt(t, url, 1).Hash {
		t.Fatalf("the block: %v", block)
	}
	if it["id"] != d.IDString() || it["signatureType"] != 2.0 || fmt.Sprint(it["data"]) != "map[size:2 type:application/json]" ||
		fmt.Sprint(it["bundledIn"]) != "map[id:"+tx.IDString()+"]" || fmt.Sprint(it["fee"]) != "map[ar:0 winston:0]" ||
		fmt.Sprint(it["block"]) != fmt.Sprint(block) || it["anchor"] != "" {
		t.Fatalf("the item: %v", it)
	}
}

func TestGraphQLAmount(t *testing.T) {
	for winston, ar := range map[string]string{"0": "0", "1": "0.000000000001", "1000000000000": "1", "1500000000000": "1.5", "262244000": "0.000262244", "123000000000000000": "123000"} {
		if got := gqlAmount(winston)["ar"]; got != ar {
			t.Errorf("%s winston: %s AR, want %s", winston, got, ar)
		}
	}
}

// Errors come in Apollo Server's shape: 400 for a query that does not parse or validate, 200
// with data null for one that fails as it runs.
func TestGraphQLErrors(t *testing.T) {
	_, _, url := start(t)
	for _, tc := range []struct {
		query  string
		vars   map[string]any
		status int
		code   string
		msg    string
	}{
		{`{ transactions { edges { node { bogus } } } }`, nil, 400, "GRAPHQL_VALIDATION_FAILED", `Cannot query field "bogus" on type "Transaction".`},
		{`{ transactions(owner: "x") { edges { cursor } } }`, nil, 400, "GRAPHQL_VALIDATION_FAILED", `Unknown argument "owner" on field "Query.transactions".`},
		{`{ transactions { edges } }`, nil, 400, "GRAPHQL_VALIDATION_FAILED", `Field "edges" of type "[TransactionEdge!]!" must have a selection of subfields.`},
		{`{ transactions { edges { cursor { x } } } }`, nil, 400, "GRAPHQL_VALIDATION_FAILED", `Field "cursor" must not have a selection since type "String!" has no subfields.`},
		{`{ transactions(after: $c) { edges { cursor } } }`, nil, 400, "GRAPHQL_VALIDATION_FAILED", `Variable "$c" is not defined.`},
		{`query($o: [String!]!) { transactions(owners: $o) { edges { cursor } } }`, nil, 400, "GRAPHQL_VALIDATION_FAILED", `Variable "$o" of required type "[String!]!" was not provided.`},
		{`{ transactions(tags: {name: "a", values: ["b"], op: NEQ}) { edges { cursor } } }`, nil, 400, "GRAPHQL_VALIDATION_FAILED", "not supported"},
		{`{ blocks { edges { cursor } } }`, nil, 400, "GRAPHQL_VALIDATION_FAILED", "not served"},
		{`{ transactions { ...F } } fragment F on TransactionConnection { edges { cursor } }`, nil, 400, "GRAPHQL_PARSE_FAILED", "Fragments are not supported"},
		{`{ transactions(first: 1 { edges { cursor } } }`, nil, 400, "GRAPHQL_PARSE_FAILED", `Syntax Error: Unexpected "{".`},
		{`{ transactions(after: "bm90IGEgY3Vyc29y") { edges { cursor } } }`, nil, 200, "BAD_USER_INPUT", "Invalid transaction cursor"},
		{`query A { transactions { edges { cursor } } } query B { transactions { edges { cursor } } }`, nil, 400, "GRAPHQL_VALIDATION_FAILED", "Must provide operation name"},
	} {
		status, body := gql(t, url, tc.query, tc.vars)
		var got struct {
			Errors []struct {
				Message    string
				Locations  []struct{ Line, Column int }
				Extensions struct{ Code string }
			}
			Data *json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &got); err != nil || status != tc.status || len(got.Errors) != 1 ||
			!strings.Contains(got.Errors[0].Message, tc.msg) || got.Errors[0].Extensions.Code != tc.code {
			t.Errorf("%s: %d %s", tc.query, status, body)
			continue
		}
		if status == 200 && (got.Data == nil || string(*got.Data) != "null") && !bytes.Contains(body, []byte(`"data":null`)) {
			t.Errorf("%s: no data: null in %s", tc.query, body)
		}
	}
	resp, err := http.Post(url+"/graphql", "application/json", strings.NewReader(`{"querry": "{}"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("no query: %d", resp.StatusCode)
	}
}

// The parser reads what clients write: comments, commas, escapes, a single value for a
// list, a default, an operation picked by name, a field asked twice.
func TestGraphQLParse(t *testing.T) {
	ops, err := parseGraphQL("# a comment\nquery A($n: Int = 5, $s: String) { x: f(a: \"\\u00e9\\n\\\"\", b: [1, -2.5e1, true, null, E], c: {k: $s}) { y } }\nquery B { g }")
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].name != "A" || len(ops[0].vars) != 2 || ops[0].vars[0].def != int64(5) || ops[0].vars[1].typ != "String" {
		t.Fatalf("%+v", ops[0])
	}
	fl := ops[0].sel[0]
	if fl.alias != "x" || fl.name != "f" || fl.args[0].val != "é\n\"" ||
		fmt.Sprint(fl.args[1].val) != "[1 -25 true <nil> E]" || fl.args[2].val.(gqlObjectValue)["k"] != (gqlVar{"s"}) {
		t.Fatalf("%+v %v", fl, fl.args)
	}
	if _, err := parseGraphQL(`{ a(b: "unterminated) }`); err == nil || !strings.Contains(err.Error(), "Unterminated string") {
		t.Fatalf("unterminated: %v", err)
	}
	f, c, url := start(t)
	w := wallet(t)
	tx := signed(t, c, w, 10, nil)
	post(t, c, tx)
	f.Mine()
	status, body := gqlOp(t, url, `query Other { transactions { edges { cursor } } }
	query Mine($o: String!) { t: transactions(owners: $o, tags: {name: "App-Name", values: "test"}) { edges { node { id } node { block { height } } } } }`,
		map[string]any{"o": w.Address()}, "Mine")
	if want := `{"data":{"t":{"edges":[{"node":{"id":"` + tx.IDString() + `","block":{"height":1}}}]}}}`; status != 200 || strings.TrimSpace(string(body)) != want {
		t.Fatalf("%d %s\nwant %s", status, body, want)
	}
}

// The arweave client's listing (Transactions) against the fake's GraphQL: a wallet's L1
// transactions carrying the tags asked for, every one once across pages of 100, newest
// first, with the height of the mined ones and -1 for the pending; another wallet's, other
// tags' and data items left out.
func TestClientListsWalletTransactions(t *testing.T) {
	f, c, _ := startWith(t, Config{Manual: true, MaxBlockTxs: 1000})
	a, b := wallet(t), func() *arweave.Wallet {
		w, err := arweave.GenerateWallet(2048)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}()
	tags := func(chain string) []arweave.Tag {
		return []arweave.Tag{{Name: []byte("App-Name"), Value: []byte("shardkeeper")}, {Name: []byte("Chain"), Value: []byte(chain)}}
	}
	var want []string // A's on chain x, in the order posted
	for i := range 230 {
		switch {
		case i%7 == 3: // B's, same tags
			post(t, c, signedData(t, c, b, []byte(fmt.Sprint(i)), tags("x"), nil))
		case i%5 == 1: // A's, another chain
			post(t, c, signedData(t, c, a, []byte(fmt.Sprint(i)), tags("y"), nil))
		case i%11 == 2: // A's bundle on chain x, whose item carries the same tags: listed, the item not
			it := item(t, edSigner(t, byte(i)), fmt.Sprint("event ", i), "App-Name", "shardkeeper", "Chain", "x")
			tx := bundleTx(t, c, a, encode(t, it), func(tx *arweave.Tx) { tx.Tags = append(tx.Tags, tags("x")[1]) })
			post(t, c, tx)
			want = append(want, tx.IDString())
		default:
			tx := signedData(t, c, a, []byte(fmt.Sprint(i)), tags("x"), nil)
			post(t, c, tx)
			want = append(want, tx.IDString())
		}
		if i == 199 {
			f.Mine() // the first 200 mined in one block, the rest pending
		}
	}
	got, err := c.Transactions(context.Background(), a.Address(), map[string]string{"App-Name": "shardkeeper", "Chain": "x"})
	if err != nil {
		t.Fatal(err)
	}
	height, err := c.Height(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(want) < 150 {
		t.Fatalf("listed %d transactions, want %d", len(got), len(want))
	}
	pending := 0
	for i, l := range got {
		// Newest first: the reverse of the order posted.
		if w := want[len(want)-1-i]; l.ID != w {
			t.Fatalf("listed #%d is %s, want %s", i, l.ID, w)
		}
		switch {
		case l.Height == -1:
			pending++
		case l.Height != height:
			t.Errorf("%s listed at height %d, mined in %d", l.ID, l.Height, height)
		}
	}
	if pending == 0 || pending == len(got) {
		t.Errorf("%d of %d pending, want the ones posted after the block", pending, len(got))
	}
}
