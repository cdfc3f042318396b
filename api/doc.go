// Package api is the HTTP toolkit every route of a node uses, below the services: the
// contract's error body and the table of error codes (Codes), JSON decoding with the
// contract's messages, bearer and admin auth, rate limiting, load shedding, connection limits,
// request metrics, calling an actor with a deadline, and the OpenAPI document. It knows no
// service and no cluster; the operators' routes are package ops, the mux is the node's.
package api
