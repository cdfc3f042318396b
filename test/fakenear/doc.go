// Package fakenear is a fake NEAR JSON-RPC node for tests: one in-memory chain served by one or
// more HTTP endpoints that answer the JSON-RPC methods a relayer uses (block, query
// view_access_key/view_account, send_tx, broadcast_tx_async/commit, tx, EXPERIMENTAL_tx_status,
// status, gas_price) with the JSON nearcore writes, so that near.Client and near-api-js parse
// every answer, error included, into the type they would get from a real node.
//
// What it models, as nearcore does it:
//
//   - Blocks every Config.BlockInterval (or only when a test steps them), each with a height and
//     a hash; the final block is FinalityLag blocks behind the head; state is kept per block,
//     so a view at finality "final" answers what the final block holds.
//   - A transaction's block hash must name one of the last ValidityPeriod blocks (nearcore:
//     prev_height <= base_height + transaction_validity_period), else Expired; an unknown hash
//     is Expired too (nearcore answers InvalidChain only for a known block on another fork, and
//     this chain has no forks).
//   - Nonces: a transaction needs nonce > the access key's nonce (InvalidNonce) and, when it is
//     included in block h, nonce < h·10⁶ (NonceTooLarge); when it lands the key's nonce becomes
//     the transaction's. A key added by an AddKey action in block h starts at (h-1)·10⁶.
//   - Validation in nearcore's order: validity window, actions, signature (ed25519 over
//     sha256(borsh(tx))), signer and key existence, nonce, balance, key permission.
//   - A pool per (signer, public key): each block takes every pending transaction of each key in
//     nonce order, re-validates it against the state the block builds and drops the ones that
//     became invalid. A higher nonce that arrives one block before a lower one lands first and
//     the lower one is then invalid: the hazard a relayer must avoid is reproduced, not fixed.
//   - send_tx with wait_until NONE answers before validating (a refused transaction then just
//     never lands); other levels validate first and answer nearcore's InvalidTransaction error,
//     or wait for the level and answer the outcome, or TIMEOUT_ERROR when the wait ends.
//     Sending the same signed bytes again is the same transaction: nothing new happens, and
//     once it landed the waiting forms answer its outcome (see README.md for the cases).
//   - Actions, minimally: CreateAccount, Transfer, FunctionCall (an empty SuccessValue, except
//     the method "fail", which fails), AddKey, DeleteKey, DeleteAccount, and NEP-366 Delegate
//     actions (signature over the NEP-461 hash, expiry, nonce, then the inner actions run as
//     the delegate's sender).
//
// Faults (latency as a per-connection delay line, dropped answers, HTTP 408/503, TIMEOUT_ERROR,
// transactions accepted and lost, a foreign sender taking a nonce, an endpoint that forwards
// transactions late) are set per endpoint, by rate or for the next N requests, with randomness
// from a seed. A ledger records every transaction that landed, was refused, dropped or lost.
//
// README.md lists what is not modelled, the binary's flags and the /fake/ admin endpoints.
package fakenear
