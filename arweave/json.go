package arweave

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// txJSON is a transaction's JSON form.
type txJSON struct {
	Format    int       `json:"format"`
	ID        string    `json:"id"`
	LastTx    string    `json:"last_tx"`
	Owner     string    `json:"owner"`
	Tags      []tagJSON `json:"tags"`
	Target    string    `json:"target"`
	Quantity  string    `json:"quantity"`
	Data      string    `json:"data"`
	DataSize  string    `json:"data_size"`
	DataRoot  string    `json:"data_root"`
	Reward    string    `json:"reward"`
	Signature string    `json:"signature"`
}

type tagJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

var b64 = base64.RawURLEncoding

// MarshalJSON encodes t as POST /tx takes it (data included; leave Data nil to post the
// header alone and upload chunks).
func (t *Tx) MarshalJSON() ([]byte, error) {
	j := txJSON{Format: 2, ID: b64.EncodeToString(t.ID), LastTx: b64.EncodeToString(t.LastTx), Owner: b64.EncodeToString(t.Owner),
		Tags: []tagJSON{}, Target: b64.EncodeToString(t.Target), Quantity: t.Quantity, Data: b64.EncodeToString(t.Data),
		DataSize: strconv.Itoa(t.DataSize), DataRoot: b64.EncodeToString(t.DataRoot), Reward: t.Reward,
		Signature: b64.EncodeToString(t.Signature)}
	for _, tag := range t.Tags {
		j.Tags = append(j.Tags, tagJSON{Name: b64.EncodeToString(tag.Name), Value: b64.EncodeToString(tag.Value)})
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes a transaction of format 2.
func (t *Tx) UnmarshalJSON(b []byte) error {
	var j txJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.Format != 2 {
		return fmt.Errorf("transaction format %d, want 2", j.Format)
	}
	var ferr error
	field := func(name, s string) []byte {
		v, e := b64.DecodeString(s)
		if e != nil && ferr == nil {
			ferr = fmt.Errorf("field %s is not base64url", name)
		}
		return v
	}
	*t = Tx{ID: field("id", j.ID), LastTx: field("last_tx", j.LastTx), Owner: field("owner", j.Owner),
		Target: field("target", j.Target), Quantity: j.Quantity, Reward: j.Reward, Data: field("data", j.Data),
		DataRoot: field("data_root", j.DataRoot), Signature: field("signature", j.Signature)}
	for _, tag := range j.Tags {
		t.Tags = append(t.Tags, Tag{Name: field("tag name", tag.Name), Value: field("tag value", tag.Value)})
	}
	size, err := strconv.Atoi(j.DataSize)
	if err != nil || size < 0 {
		return fmt.Errorf("data_size %q is not a size", j.DataSize)
	}
	t.DataSize = size
	if j.Data == "" {
		t.Data = nil // header only
	}
	return ferr
}
