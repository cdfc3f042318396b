package actors_test

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/shardkeeper/shardkeeper/actors"
)

// listRequest is the body of "list": optionally a put in the same message, then a List.
type listRequest struct {
	Options actors.ListOptions
	Put     *[2][]byte // bytes, so that JSON keeps non-UTF-8 keys intact
}

// writesRequest is the body of "writes": writes in order (a nil value deletes), then reads.
type writesRequest struct {
	Writes [][2]*string
	Get    []string
}

// kvHandler is a test kind exposing the storage transaction directly.
// put "k=v", delete "k", get "k", list (JSON listRequest → JSON [][2]string),
// writes (JSON writesRequest → JSON []*string, the values read), put-then-fail "k=v" (writes
// then errors), panic.
type kvHandler struct{}

func (kvHandler) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	switch req.Method {
	case "put-then-reject":
		k, v, _ := bytes.Cut(req.Body, []byte("="))
		ctx.Put(k, v)
		return nil, actors.Errorf("rejected", "kept the write")
	case "put", "put-then-fail":
		k, v, _ := bytes.Cut(req.Body, []byte("="))
		ctx.Put(k, v)
		if req.Method == "put-then-fail" {
			return nil, fmt.Errorf("failing after a write")
		}
		return nil, nil
	case "delete":
		ctx.Delete(req.Body)
		return nil, nil
	case "get":
		v, ok, err := ctx.Get(req.Body)
		if !ok {
			return []byte("<none>"), err
		}
		return v, err
	case "list":
		var l listRequest
		if err := json.Unmarshal(req.Body, &l); err != nil {
			return nil, err
		}
		if l.Put != nil {
			ctx.Put(l.Put[0], l.Put[1])
		}
		kvs, err := ctx.List(l.Options)
		if err != nil {
			return nil, err
		}
		out := [][2]string{}
		for _, kv := range kvs {
			out = append(out, [2]string{string(kv.Key), string(kv.Value)})
		}
		return json.Marshal(out)
	case "writes":
		var w writesRequest
		if err := json.Unmarshal(req.Body, &w); err != nil {
			return nil, err
		}
		for _, kv := range w.Writes {
			if kv[1] == nil {
				ctx.Delete([]byte(*kv[0]))
			} else {
				ctx.Put([]byte(*kv[0]), []byte(*kv[1]))
			}
		}
		got := make([]*string, len(w.Get))
		for i, k := range w.Get {
			v, ok, err := ctx.Get([]byte(k))
			if err != nil {
				return nil, err
			}
			if ok {
				s := string(v)
				got[i] = &s
			}
		}
		return json.Marshal(got)
	case "panic":
		panic("handler panic for the test")
	}
	return nil, fmt.Errorf("kv: unknown method %q", req.Method)
}
