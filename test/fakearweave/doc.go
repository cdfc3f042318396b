// Package fakearweave is an Arweave node, and the ar.io-style gateway in front of it, for
// tests: faithful where shardkeeper depends on the real ones, at the network's real scale.
//
// # The node
//
// It validates what it is posted as a node does (format, signature, id, data root, anchor,
// reward), answers 208 for a transaction it already has, takes data in the body or by chunks
// (POST /chunk), and serves statuses (GET /tx/{id}/status: 202 pending, 200 mined with
// confirmations, 404), headers (GET /tx/{id}), data (GET /tx/{id}/data), blocks (GET
// /block/height/{h}, /block/hash/{hash}: indep_hash, previous_block, height, timestamp, txs),
// GET /info, /tx_anchor and /price/{bytes}. Errors are worded as a node words them.
//
// Blocks are mined every Config.BlockInterval (Arweave's two minutes work too) or on Mine. A
// block holds at most Config.MaxBlockTxs transactions (1000, BLOCK_TX_COUNT_LIMIT), the highest
// rewards first and equal rewards in the order taken; the rest wait for later blocks. A
// transaction can be mined while its anchor is among the AnchorDepth blocks before the block
// (50); one whose anchor falls out of them is dropped. There is no cap on a block's bytes:
// Arweave's counts only format-1 data, carried in blocks, and the node takes format 2 only.
//
// Reorg (POST /admin/reorg?depth=N) replaces the last blocks by as many empty ones with new
// hashes: the height stays, the transactions they held are dropped (404) until posted again,
// and what was anchored on them is dropped or refused.
//
// # The gateway
//
// A transaction tagged Bundle-Format: binary and Bundle-Version: 2.0.0 is unbundled (ANS-104,
// package arweave/ans104) once its data is complete: if it parses and every item verifies,
// its items are indexed (Items, Bundle, GET /admin/bundles/{id}) and, once the bundle is
// mined, served by id at GET /{id} and /raw/{id} with ar.io's headers (Content-Type from the
// item's tag, X-AR-IO-Root-Transaction-Id and offsets, X-Arweave-Tag-*). Otherwise the bundle
// is still mined, as any transaction, and Bundle records why its items are not indexed.
//
// POST /graphql answers the Arweave GraphQL API's transactions query (owners, tags,
// bundledIn, ids, recipients, block; first/after; HEIGHT_DESC or HEIGHT_ASC) and
// transaction(id), over what the node took and the items it indexed, in ar.io's shapes.
//
// # Faults and admin
//
// Faults on request: latency on every answer (waited out concurrently), answers dropped after
// the post was taken, 429 and 503, and transactions dropped from the mempool before they are
// mined. Runnable as a process (cmd/fakearweave); GET/POST /admin/… drive it: mine, reorg,
// faults, tamper, mined, bundles.
package fakearweave
