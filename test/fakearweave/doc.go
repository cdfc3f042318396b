// Package fakearweave is an Arweave node for tests, faithful where shardkeeper depends on the
// real one: it validates what it is posted as a node does (format, signature, id, data root,
// anchor, reward), mines blocks, answers 208 for a transaction it already has, serves
// statuses (202 pending, 200 mined with confirmations, 404), headers and data, and takes data
// in the body or by chunks. Faults on request: latency, answers dropped after the post was
// taken, 429 and 503, and transactions dropped from the mempool before they are mined.
// Runnable as a process (cmd/fakearweave); GET/POST /admin/… drive it.
package fakearweave
