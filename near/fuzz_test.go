package near

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// The decoders read bytes from clients (signed delegate actions) and, in tests, from the
// relayer. Whatever they accept must re-encode to exactly the bytes read: an encoding with
// two readings would let two byte strings pass for one transaction.

func vectorSeeds(f *testing.F, delegates bool) {
	data, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		f.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(data, &v); err != nil {
		f.Fatal(err)
	}
	add := func(s string) {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	if delegates {
		for _, d := range v.Delegates {
			add(d.Signed)
		}
		return
	}
	for _, tx := range v.Transactions {
		add(tx.Signed)
	}
}

func FuzzDecodeSignedTransaction(f *testing.F) {
	vectorSeeds(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := DecodeSignedTransaction(b)
		if err != nil {
			return
		}
		again, err := st.Encode()
		if err != nil {
			t.Fatalf("decoded but cannot encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded differently:\n%x\n%x", again, b)
		}
	})
}

func FuzzDecodeSignedDelegateAction(f *testing.F) {
	vectorSeeds(f, true)
	f.Fuzz(func(t *testing.T, b []byte) {
		sd, err := DecodeSignedDelegateAction(b)
		if err != nil {
			return
		}
		again, err := sd.Encode()
		if err != nil {
			t.Fatalf("decoded but cannot encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded differently:\n%x\n%x", again, b)
		}
	})
}

func FuzzParseAction(f *testing.F) {
	for _, s := range []string{
		`"CreateAccount"`,
		`{"Transfer":{"deposit":"1"}}`,
		`{"FunctionCall":{"method_name":"m","args":"e30=","gas":1,"deposit":"0"}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":"FullAccess"}}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":{"FunctionCall":{"allowance":null,"receiver_id":"a","method_names":["x"]}}}}}`,
		`{"DeleteKey":{"public_key":"` + testPK + `"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAction(b)
		if err != nil {
			return
		}
		out, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("parsed %s but cannot marshal: %v", b, err)
		}
		back, err := ParseAction(out)
		if err != nil || !reflect.DeepEqual(back, a) {
			t.Fatalf("%s -> %s -> %#v, %v", b, out, back, err)
		}
	})
}
