// Package chain is the attestation chain: a global, sequential chain of attestation events,
// one actor per chain name, each event one Arweave transaction linked to the one before it
// (prev_tx, prev_cid, seq), so that the whole history can be walked and checked on Arweave
// alone.
//
// This file set holds the parts that do not depend on the actor: what an event is and when
// two are the same (event.go), the Arweave transaction an event becomes (payload.go), and the
// walk that checks a chain on a gateway (verify.go).
package chain
