package fakearweave

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// What Query.transactions and Query.transaction answer: rows, their order and cursors, and
// the Transaction each row is.

// gqlRow is a transaction or a data item as GraphQL lists it, with its place in the order.
type gqlRow struct {
	id      string
	pending bool
	height  int    // mined at (an item: its bundle)
	index   int    // place in the block (an item: its bundle's)
	item    []byte // the data item's id; nil for a transaction
	seq     int    // order taken (a pending transaction)
	e       *entry // the transaction; nil for an item
	it      servedItem
}

// gqlCmp orders rows as HEIGHT_ASC does: mined before pending; mined by height, place in the
// block, then data item id with the bundle's own row first; pending in the order taken.
func gqlCmp(a, b *gqlRow) int {
	if a.pending != b.pending {
		if a.pending {
			return 1
		}
		return -1
	}
	if a.pending {
		if c := a.seq - b.seq; c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	}
	if c := a.height - b.height; c != 0 {
		return c
	}
	if c := a.index - b.index; c != 0 {
		return c
	}
	return bytes.Compare(itemKey(a.item), itemKey(b.item))
}

// itemKey is what ar.io sorts on after the place in block: the item's id, or 0x00 for the
// transaction itself.
func itemKey(item []byte) []byte {
	if item == nil {
		return []byte{0}
	}
	return item
}

func gqlCursor(r *gqlRow) string {
	var height, index, seq any
	if r.pending {
		seq = r.seq
	} else {
		height, index = r.height, r.index
	}
	b, _ := json.Marshal([]any{height, index, r.item != nil, r.id, seq})
	return b64.EncodeToString(b)
}

// gqlAfter reads a cursor back into the place it names in the order.
func gqlAfter(cursor string) (*gqlRow, error) {
	invalid := &gqlError{msg: "Invalid transaction cursor", path: []string{"transactions"}}
	raw, err := b64.DecodeString(cursor)
	if err != nil {
		return nil, invalid
	}
	var c []any
	if json.Unmarshal(raw, &c) != nil || len(c) != 5 {
		return nil, invalid
	}
	id, ok := c[3].(string)
	if !ok {
		return nil, invalid
	}
	r := &gqlRow{id: id}
	num := func(v any) (int, bool) {
		n, ok := v.(float64)
		return int(n), ok && n == float64(int(n))
	}
	if c[0] == nil {
		r.pending = true
		if r.seq, ok = num(c[4]); !ok {
			return nil, invalid
		}
		return r, nil
	}
	var ok1, ok2 bool
	r.height, ok1 = num(c[0])
	r.index, ok2 = num(c[1])
	isItem, ok3 := c[2].(bool)
	if !ok1 || !ok2 || !ok3 {
		return nil, invalid
	}
	if isItem {
		if r.item, err = b64.DecodeString(id); err != nil {
			return nil, invalid
		}
	}
	return r, nil
}

func (f *Fake) gqlRun(plan []gqlStep) (gqlOut, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := gqlOut{}
	for _, s := range plan {
		key := s.field.alias
		if key == "" {
			key = s.field.name
		}
		var v any
		switch s.field.name {
		case "__typename":
			v = "Query"
		case "transactions":
			conn, err := f.gqlTransactions(s.txs)
			if err != nil {
				return nil, err
			}
			v = gqlProject(conn, s.field.sel)
		case "transaction":
			var found *gqlRow
			for _, r := range f.gqlRows(&gqlTxQuery{ids: map[string]bool{s.id: true}, minHeight: -1, maxHeight: -1}) {
				found = r
			}
			if found != nil {
				v = gqlProject(f.gqlNode(found), s.field.sel)
			}
		}
		out = append(out, gqlKV{key, v})
	}
	return out, nil
}

func (f *Fake) gqlTransactions(q *gqlTxQuery) (map[string]any, error) {
	var after *gqlRow
	if q.after != "" {
		var err error
		if after, err = gqlAfter(q.after); err != nil {
			return nil, err
		}
	}
	rows := f.gqlRows(q)
	cmp := gqlCmp
	if !q.asc {
		cmp = func(a, b *gqlRow) int { return gqlCmp(b, a) }
	}
	slices.SortFunc(rows, cmp)
	start := 0
	if after != nil {
		start, _ = slices.BinarySearchFunc(rows, after, cmp)
		if start < len(rows) && cmp(rows[start], after) == 0 {
			start++
		}
	}
	end := min(start+q.first, len(rows))
	edges := []map[string]any{}
	for _, r := range rows[start:end] {
		edges = append(edges, map[string]any{"__typename": "TransactionEdge", "cursor": gqlCursor(r), "node": f.gqlNode(r)})
	}
	return map[string]any{"__typename": "TransactionConnection",
		"pageInfo": map[string]any{"__typename": "PageInfo", "hasNextPage": end < len(rows)},
		"edges":    edges}, nil
}

// gqlRows lists the transactions and served data items that pass q's filters. Caller holds mu.
func (f *Fake) gqlRows(q *gqlTxQuery) []*gqlRow {
	var rows []*gqlRow
	match := func(r *gqlRow, owner, target string, tags []arweave.Tag) {
		switch {
		case q.ids != nil && !q.ids[r.id],
			q.owners != nil && !q.owners[owner],
			q.recipients != nil && !q.recipients[target],
			q.minHeight > 0 && (r.pending || r.height < q.minHeight),
			q.maxHeight >= 0 && (r.pending || r.height > q.maxHeight):
			return
		}
		for _, tf := range q.tags {
			if !slices.ContainsFunc(tags, func(t arweave.Tag) bool { return string(t.Name) == tf.name && tf.values[string(t.Value)] }) {
				return
			}
		}
		rows = append(rows, r)
	}
	if q.bundledIn == nil {
		for id, e := range f.txs {
			r := &gqlRow{id: id, pending: e.height < 0, height: e.height, index: e.index, seq: e.seq, e: e}
			match(r, arweave.AddressOf(e.tx.Owner), b64.EncodeToString(e.tx.Target), e.tx.Tags)
		}
	}
	if !q.l1Only {
		for id := range f.items {
			it, ok := f.served(id)
			if !ok || q.bundledIn != nil && !q.bundledIn[it.root] {
				continue
			}
			itemID := it.item.ID()
			r := &gqlRow{id: id, height: it.height, index: it.index, item: itemID[:], it: it}
			match(r, it.info.Owner, it.info.Target, it.info.Tags)
		}
	}
	return rows
}

// gqlNode is a row as a Transaction, every field filled (gqlProject keeps those asked).
// Caller holds mu.
func (f *Fake) gqlNode(r *gqlRow) map[string]any {
	n := map[string]any{"__typename": "Transaction", "id": r.id, "block": nil, "bundledIn": nil, "parent": nil}
	if !r.pending {
		b := f.blocks[r.height]
		prev := ""
		if r.height > 0 {
			prev = b64.EncodeToString(f.blocks[r.height-1].hash)
		}
		n["block"] = map[string]any{"__typename": "Block", "id": b64.EncodeToString(b.hash), "timestamp": b.at.Unix(),
			"height": r.height, "previous": prev}
	}
	var (
		anchor, signature, owner, target []byte
		sigType                          int
		tags                             []arweave.Tag
		reward, quantity                 = "0", "0"
		size                             int
	)
	if r.e != nil {
		tx := r.e.tx
		anchor, signature, owner, target, sigType, tags, size = tx.LastTx, tx.Signature, tx.Owner, tx.Target, 1, tx.Tags, tx.DataSize
		reward = tx.Reward
		if tx.Quantity != "" {
			quantity = tx.Quantity
		}
	} else {
		d := r.it.item
		anchor, signature, owner, target, sigType, tags, size = d.Anchor(), d.Signature(), d.Owner(), d.Target(), int(d.SignatureType()), r.it.info.Tags, r.it.info.DataSize
		n["bundledIn"] = map[string]any{"__typename": "Bundle", "id": r.it.root}
		n["parent"] = map[string]any{"__typename": "Parent", "id": r.it.root}
	}
	var ct any
	if v, ok := firstTag(tags, "Content-Type"); ok {
		ct = v
	}
	tagList := []map[string]any{}
	for _, t := range tags {
		tagList = append(tagList, map[string]any{"__typename": "Tag", "name": string(t.Name), "value": string(t.Value)})
	}
	n["anchor"] = b64.EncodeToString(anchor)
	n["signature"] = b64.EncodeToString(signature)
	n["signatureType"] = sigType
	n["recipient"] = b64.EncodeToString(target)
	n["owner"] = map[string]any{"__typename": "Owner", "address": arweave.AddressOf(owner), "key": b64.EncodeToString(owner)}
	n["fee"] = gqlAmount(reward)
	n["quantity"] = gqlAmount(quantity)
	n["data"] = map[string]any{"__typename": "MetaData", "size": strconv.Itoa(size), "type": ct}
	n["tags"] = tagList
	return n
}

// gqlAmount is an Amount: winston, and AR with 12 decimals, trailing zeros trimmed (as
// arweave-js's winstonToAr, which ar.io uses).
func gqlAmount(winston string) map[string]any {
	ar := winston
	if n, ok := new(big.Int).SetString(winston, 10); ok && n.Sign() >= 0 {
		unit := big.NewInt(1_000_000_000_000)
		q, r := new(big.Int).QuoRem(n, unit, new(big.Int))
		ar = strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%s.%012d", q, r), "0"), ".")
	}
	return map[string]any{"__typename": "Amount", "winston": winston, "ar": ar}
}

// gqlProject keeps of v the fields sel asks for, in its order, under their aliases.
func gqlProject(v any, sel []*gqlField) any {
	switch x := v.(type) {
	case map[string]any:
		out := gqlOut{}
		for _, fl := range sel {
			key := fl.alias
			if key == "" {
				key = fl.name
			}
			out = append(out, gqlKV{key, gqlProject(x[fl.name], fl.sel)})
		}
		return out
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = gqlProject(e, sel)
		}
		return out
	}
	return v
}
