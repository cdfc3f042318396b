// Package relayer is the NEAR relayer transaction manager service, in which each configured
// access key is one actor, the single submitter of that key's transactions. Here: the
// relayer's settings and access keys (service.go; the --relayer-keys file, refused when other
// users can access it: keys.go), the rendezvous assignment of intents to an account's keys
// (assign.go), the index that remembers where each idempotency key went (kind relayer-index,
// index.go), the access-key actor (kind relayer-key, kind.go): its intent records and storage
// (intent.go), its decisions as pure functions (decide.go), the RPC seam with the ordering of
// its sends (rpc.go) and the moves of queued intents off removed keys (move.go); and the HTTP
// routes (http.go).
//
// An intent's life: submit stores it queued; once the key's nonce (ViewAccessKey) and a recent
// final block are known, it is signed in the handler with the next nonce, its bytes and hash
// stored, and sent after that commit (wait_until NONE, one answer apart, in nonce order); its
// status is then asked by its signed bytes until NEAR reports it final (succeeded, failed), or
// refuses it (rejected), or proves it dead (refused for its nonce or block hash while unknown,
// or unknown past the validity window), when it is signed again with a new nonce. A lost answer
// or a new activation only ever re-sends the identical bytes.
package relayer
