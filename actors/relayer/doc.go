// Package relayer is the NEAR relayer transaction manager domain, in which each configured
// access key is one actor, the single submitter of that key's transactions. Here: the
// relayer's access keys (the --relayer-keys file, refused when other users can access it) and
// the rendezvous assignment of intents to an account's keys.
package relayer
