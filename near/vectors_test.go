package near

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strconv"
	"testing"
)

// The golden vectors: transactions and delegate actions that near-api-js built, encoded,
// hashed and signed (testdata/gen). Matching them byte for byte is what makes a relayer's
// transaction acceptable to NEAR; decoding them back checks the decoder on bytes this package
// did not write.

type vectorFile struct {
	Generator string `json:"generator"`
	Keys      map[string]struct {
		SecretKey string `json:"secret_key"`
		PublicKey string `json:"public_key"`
	} `json:"keys"`
	Delegates    []delegateVector `json:"delegates"`
	Transactions []txVector       `json:"transactions"`
}

type delegateVector struct {
	Name           string            `json:"name"`
	Signer         string            `json:"signer"`
	SenderID       string            `json:"sender_id"`
	ReceiverID     string            `json:"receiver_id"`
	Actions        []json.RawMessage `json:"actions"`
	Nonce          string            `json:"nonce"`
	MaxBlockHeight string            `json:"max_block_height"`
	PublicKey      string            `json:"public_key"`
	NEP461Message  string            `json:"nep461_message"` // hex of prefix || borsh
	Hash           string            `json:"hash"`
	Signature      string            `json:"signature"`
	Signed         string            `json:"signed"` // base64 of the SignedDelegateAction
}

type txVector struct {
	Name           string            `json:"name"`
	Signer         string            `json:"signer"`
	SignerID       string            `json:"signer_id"`
	ReceiverID     string            `json:"receiver_id"`
	Nonce          string            `json:"nonce"`
	BlockHash      string            `json:"block_hash"`
	Actions        []json.RawMessage `json:"actions"`
	SignedDelegate string            `json:"signed_delegate"` // appended as a Delegate action
	PublicKey      string            `json:"public_key"`
	Borsh          string            `json:"borsh"` // hex of the unsigned transaction
	Hash           string            `json:"hash"`
	Signature      string            `json:"signature"`
	Signed         string            `json:"signed"` // base64 of the SignedTransaction
}

func loadVectors(t *testing.T) *vectorFile {
	t.Helper()
	data, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Transactions) < 10 || len(v.Delegates) < 2 {
		t.Fatalf("vectors.json holds %d transactions and %d delegates; regenerate it (testdata/gen)", len(v.Transactions), len(v.Delegates))
	}
	return &v
}

func (v *vectorFile) keyPair(t *testing.T, name string) *KeyPair {
	t.Helper()
	k, ok := v.Keys[name]
	if !ok {
		t.Fatalf("no key %q in the vectors", name)
	}
	kp, err := ParseKeyPair(k.SecretKey)
	if err != nil {
		t.Fatalf("key %s: %v", name, err)
	}
	if got := kp.PublicKey().String(); got != k.PublicKey {
		t.Fatalf("key %s: public key %s, near-api-js derived %s", name, got, k.PublicKey)
	}
	return kp
}

// vectorActions reads actions in NEAR's JSON form: the five an intent may carry through
// ParseAction (so the JSON reader is checked too), the others — which ParseAction must refuse
// as unsupported — by hand.
func vectorActions(t *testing.T, raw []json.RawMessage) []Action {
	t.Helper()
	out := []Action{}
	for i, r := range raw {
		a, err := ParseAction(r)
		if err == nil {
			out = append(out, a)
			continue
		}
		if !errors.Is(err, ErrUnsupportedAction) {
			t.Fatalf("action %d %s: %v", i, r, err)
		}
		var v struct {
			DeployContract *struct{ Code []byte } `json:"DeployContract"`
			Stake          *struct {
				Stake     U128      `json:"stake"`
				PublicKey PublicKey `json:"public_key"`
			} `json:"Stake"`
			DeleteAccount *struct {
				BeneficiaryID string `json:"beneficiary_id"`
			} `json:"DeleteAccount"`
		}
		if err := json.Unmarshal(r, &v); err != nil {
			t.Fatalf("action %d %s: %v", i, r, err)
		}
		switch {
		case v.DeployContract != nil:
			out = append(out, DeployContract{Code: v.DeployContract.Code})
		case v.Stake != nil:
			out = append(out, Stake{Amount: v.Stake.Stake, PublicKey: v.Stake.PublicKey})
		case v.DeleteAccount != nil:
			out = append(out, DeleteAccount{BeneficiaryID: v.DeleteAccount.BeneficiaryID})
		default:
			t.Fatalf("action %d %s: no reader", i, r)
		}
	}
	return out
}

func mustU64(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonEqual compares two JSON texts as values (key order and spacing aside).
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func (v *vectorFile) delegate(t *testing.T, dv delegateVector) (DelegateAction, *KeyPair) {
	t.Helper()
	kp := v.keyPair(t, dv.Signer)
	pk, err := ParsePublicKey(dv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return DelegateAction{
		SenderID:       dv.SenderID,
		ReceiverID:     dv.ReceiverID,
		Actions:        vectorActions(t, dv.Actions),
		Nonce:          mustU64(t, dv.Nonce),
		MaxBlockHeight: mustU64(t, dv.MaxBlockHeight),
		PublicKey:      pk,
	}, kp
}

func TestVectorsDelegateActions(t *testing.T) {
	v := loadVectors(t)
	for _, dv := range v.Delegates {
		t.Run(dv.Name, func(t *testing.T) {
			da, kp := v.delegate(t, dv)

			body, err := da.Encode()
			if err != nil {
				t.Fatal(err)
			}
			msg := mustHex(t, dv.NEP461Message)
			if want := append([]byte{0x6e, 0x01, 0x00, 0x40}, body...); !bytes.Equal(msg, want) {
				t.Fatalf("NEP-461 message\n got %x\nwant %x", want, msg)
			}
			h, err := da.Hash()
			if err != nil {
				t.Fatal(err)
			}
			if h.String() != dv.Hash {
				t.Fatalf("hash %s, near-api-js %s", h, dv.Hash)
			}

			signed, sh, err := SignDelegateAction(da, kp)
			if err != nil {
				t.Fatal(err)
			}
			if sh != h || signed.Signature.String() != dv.Signature {
				t.Fatalf("signature %s (hash %s), near-api-js %s", signed.Signature, sh, dv.Signature)
			}
			enc, err := signed.Encode()
			if err != nil {
				t.Fatal(err)
			}
			want := mustB64(t, dv.Signed)
			if !bytes.Equal(enc, want) {
				t.Fatalf("signed delegate\n got %x\nwant %x", enc, want)
			}

			dec, err := DecodeSignedDelegateAction(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dec, signed) {
				t.Fatalf("decoded\n %#v\nwant\n %#v", dec, signed)
			}
			if vh, err := dec.Verify(); err != nil || vh != h {
				t.Fatalf("Verify: %s, %v", vh, err)
			}

			// The JSON form of every action, also the kinds ParseAction refuses, is NEAR's.
			for i, a := range da.Actions {
				got, err := json.Marshal(a)
				if err != nil {
					t.Fatal(err)
				}
				if !jsonEqual(t, got, dv.Actions[i]) {
					t.Fatalf("action %d JSON %s, want %s", i, got, dv.Actions[i])
				}
			}
		})
	}
}

func TestVectorsTransactions(t *testing.T) {
	v := loadVectors(t)
	delegates := map[string]delegateVector{}
	for _, dv := range v.Delegates {
		delegates[dv.Name] = dv
	}
	for _, tv := range v.Transactions {
		t.Run(tv.Name, func(t *testing.T) {
			kp := v.keyPair(t, tv.Signer)
			pk, err := ParsePublicKey(tv.PublicKey)
			if err != nil {
				t.Fatal(err)
			}
			bh, err := ParseHash(tv.BlockHash)
			if err != nil {
				t.Fatal(err)
			}
			actions := vectorActions(t, tv.Actions)
			if tv.SignedDelegate != "" {
				sd, err := DecodeSignedDelegateAction(mustB64(t, delegates[tv.SignedDelegate].Signed))
				if err != nil {
					t.Fatal(err)
				}
				actions = append(actions, *sd)
			}
			tx := Transaction{
				SignerID:   tv.SignerID,
				PublicKey:  pk,
				Nonce:      mustU64(t, tv.Nonce),
				ReceiverID: tv.ReceiverID,
				BlockHash:  bh,
				Actions:    actions,
			}

			enc, err := tx.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if want := mustHex(t, tv.Borsh); !bytes.Equal(enc, want) {
				t.Fatalf("borsh\n got %x\nwant %x", enc, want)
			}
			signed, h, err := SignTransaction(tx, kp)
			if err != nil {
				t.Fatal(err)
			}
			if h.String() != tv.Hash {
				t.Fatalf("hash %s, near-api-js %s", h, tv.Hash)
			}
			if signed.Signature.String() != tv.Signature {
				t.Fatalf("signature %s, near-api-js %s", signed.Signature, tv.Signature)
			}
			senc, err := signed.Encode()
			if err != nil {
				t.Fatal(err)
			}
			want := mustB64(t, tv.Signed)
			if !bytes.Equal(senc, want) {
				t.Fatalf("signed transaction\n got %x\nwant %x", senc, want)
			}

			dec, err := DecodeSignedTransaction(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dec, signed) {
				t.Fatalf("decoded\n %#v\nwant\n %#v", dec, signed)
			}
			if vh, err := dec.Verify(); err != nil || vh != h {
				t.Fatalf("Verify: %s, %v", vh, err)
			}
			udec, err := DecodeTransaction(mustHex(t, tv.Borsh))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*udec, tx) {
				t.Fatalf("decoded unsigned\n %#v\nwant\n %#v", udec, tx)
			}
		})
	}
}
