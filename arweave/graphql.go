package arweave

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
)

// Listed is a transaction as a gateway's GraphQL API lists it.
type Listed struct {
	ID string
	// Height is the block that holds it, or -1 while it is pending.
	Height int64
}

// listQuery lists L1 transactions (bundledIn: null leaves data items out) by owner and tags,
// a page at a time, newest first.
const listQuery = `query($owners: [String!], $tags: [TagFilter!], $after: String) {
  transactions(owners: $owners, tags: $tags, bundledIn: null, first: 100, after: $after) {
    pageInfo { hasNextPage }
    edges { cursor node { id block { height } } }
  }
}`

// maxListPages bounds a listing (100 transactions a page): a gateway that keeps answering
// "next page" is not followed for ever.
const maxListPages = 100_000

// Transactions lists the L1 transactions signed by the wallet at address that carry every
// tag of tags (name → value), newest first, following the gateway's pages (POST /graphql,
// the schema of arweave.net and ar.io gateways). A transaction is listed once even when a
// block mined between two pages moves it, as mined when any page said so.
func (c *Client) Transactions(ctx context.Context, address string, tags map[string]string) ([]Listed, error) {
	type tagFilter struct {
		Name   string   `json:"name"`
		Values []string `json:"values"`
	}
	var filters []tagFilter
	for _, name := range slices.Sorted(maps.Keys(tags)) {
		filters = append(filters, tagFilter{name, []string{tags[name]}})
	}
	var out []Listed
	seen := map[string]int{} // id → its place in out
	var after *string
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("arweave: GraphQL: more than %d pages of transactions", maxListPages)
		}
		body, err := json.Marshal(map[string]any{"query": listQuery, "variables": map[string]any{
			"owners": []string{address}, "tags": filters, "after": after}})
		if err != nil {
			return nil, err
		}
		resp, b, err := c.do(ctx, http.MethodPost, "/graphql", body)
		if err != nil {
			return nil, fmt.Errorf("arweave: GraphQL: %w", err)
		}
		var ans struct {
			Data *struct {
				Transactions struct {
					PageInfo struct {
						HasNextPage bool `json:"hasNextPage"`
					} `json:"pageInfo"`
					Edges []struct {
						Cursor string `json:"cursor"`
						Node   struct {
							ID    string `json:"id"`
							Block *struct {
								Height int64 `json:"height"`
							} `json:"block"`
						} `json:"node"`
					} `json:"edges"`
				} `json:"transactions"`
			} `json:"data"`
			Errors []struct {
				Message string `json:"message"`
			} `json:"errors"`
		}
		if resp.StatusCode != http.StatusOK {
			return nil, statusError("POST /graphql", resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, &ans); err != nil {
			return nil, fmt.Errorf("arweave: GraphQL: unreadable answer: %q", clip(b))
		}
		if len(ans.Errors) > 0 || ans.Data == nil {
			msg := "no data"
			if len(ans.Errors) > 0 {
				msg = ans.Errors[0].Message
			}
			return nil, fmt.Errorf("arweave: GraphQL: %s", msg)
		}
		edges := ans.Data.Transactions.Edges
		for _, e := range edges {
			l := Listed{ID: e.Node.ID, Height: -1}
			if e.Node.Block != nil {
				l.Height = e.Node.Block.Height
			}
			if i, ok := seen[e.Node.ID]; ok {
				if l.Height >= 0 {
					out[i] = l // pending on an earlier page, mined since
				}
				continue
			}
			seen[e.Node.ID] = len(out)
			out = append(out, l)
		}
		if !ans.Data.Transactions.PageInfo.HasNextPage || len(edges) == 0 {
			return out, nil
		}
		after = &edges[len(edges)-1].Cursor
	}
}
