package near

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func testKey(b byte) PublicKey {
	var k PublicKey
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

func sampleTx() Transaction {
	return Transaction{
		SignerID:   "relayer.testnet",
		PublicKey:  testKey(1),
		Nonce:      42,
		ReceiverID: "bob.testnet",
		BlockHash:  Hash{9, 9, 9},
		Actions:    []Action{Transfer{Deposit: U128From64(5)}},
	}
}

func encodeOrFail(t *testing.T, tx Transaction) []byte {
	t.Helper()
	b, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodeLayout(t *testing.T) {
	// Spelled out field by field, independently of the encoder.
	var want []byte
	le32 := func(v uint32) { want = binary.LittleEndian.AppendUint32(want, v) }
	le64 := func(v uint64) { want = binary.LittleEndian.AppendUint64(want, v) }
	le32(15)
	want = append(want, "relayer.testnet"...)
	k := testKey(1)
	want = append(append(want, 0), k[:]...)
	le64(42)
	le32(11)
	want = append(want, "bob.testnet"...)
	want = append(want, 9, 9, 9)
	want = append(want, make([]byte, 29)...)
	le32(1)                // one action
	want = append(want, 3) // Transfer
	le64(5)
	le64(0)
	if got := encodeOrFail(t, sampleTx()); !bytes.Equal(got, want) {
		t.Fatalf("\n got %x\nwant %x", got, want)
	}
}

func TestDecodeRefusesMalformedInput(t *testing.T) {
	good := encodeOrFail(t, sampleTx())
	withAction := func(action ...byte) []byte {
		b := append([]byte(nil), good[:len(good)-17]...) // cut the Transfer
		return append(b, action...)
	}
	accessKeyWith := func(tail ...byte) []byte {
		k := testKey(2)
		a := append([]byte{5, 0}, k[:]...)
		a = append(a, make([]byte, 8)...) // nonce
		return withAction(append(a, tail...)...)
	}
	cases := []struct {
		name     string
		input    []byte
		sentinel error
		message  string
	}{
		{"empty", nil, ErrBorsh, "need 4 bytes"},
		{"truncated", good[:len(good)-1], ErrBorsh, "need"},
		{"trailing byte", append(append([]byte(nil), good...), 0), ErrBorsh, "1 trailing bytes"},
		{"secp256k1 key", func() []byte {
			b := append([]byte(nil), good...)
			b[4+15] = 1
			return b
		}(), ErrBorsh, "secp256k1 is not supported"},
		{"signer id not UTF-8", func() []byte {
			b := append([]byte(nil), good...)
			b[4] = 0xff
			return b
		}(), ErrBorsh, "not valid UTF-8"},
		{"version 1 transaction", append([]byte{1, 15, 0, 0, 0}, good[4:]...), ErrBorsh, "version 1"},
		{"unsupported action tag", withAction(9), ErrUnsupportedAction, "action tag 9"},
		{"bad permission tag", accessKeyWith(2), ErrBorsh, "permission tag 2"},
		{"bad allowance option tag", accessKeyWith(0, 2), ErrBorsh, "option tag 2"},
		{"huge action count", func() []byte {
			b := append([]byte(nil), good[:len(good)-21]...)
			return append(b, 0xff, 0xff, 0xff, 0xff)
		}(), ErrBorsh, "cannot fit"},
		{"huge args length", withAction(2, 1, 0, 0, 0, 'f', 0xff, 0xff, 0xff, 0x7f), ErrBorsh, "FunctionCall args"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := DecodeTransaction(tc.input)
			if err == nil || !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.message) || tx != nil {
				t.Fatalf("got %v, %v; want an error wrapping %v saying %q", tx, err, tc.sentinel, tc.message)
			}
		})
	}
	if _, err := DecodeTransaction(good); err != nil {
		t.Fatalf("the unmodified input: %v", err)
	}
}

func TestDelegateCannotNest(t *testing.T) {
	inner := SignedDelegateAction{DelegateAction: DelegateAction{SenderID: "a.near", ReceiverID: "b.near"}}
	outer := DelegateAction{SenderID: "a.near", ReceiverID: "b.near", Actions: []Action{inner}}
	if _, err := outer.Encode(); err == nil || !strings.Contains(err.Error(), "cannot contain another") {
		t.Fatalf("encode nested: %v", err)
	}
	// The same bytes written by hand must not decode either.
	e := &encoder{}
	e.str("a.near")
	e.str("b.near")
	e.u32(1)
	e.u8(uint8(KindDelegate))
	if err := inner.encodeBody(e); err != nil {
		t.Fatal(err)
	}
	e.u64(1)
	e.u64(2)
	testKey(3).encode(e)
	e.u8(0)
	e.fixed(make([]byte, 64))
	if _, err := DecodeSignedDelegateAction(e.buf); err == nil || !errors.Is(err, ErrBorsh) ||
		!strings.Contains(err.Error(), "cannot contain another") {
		t.Fatalf("decode nested: %v", err)
	}
	// At the top level of a transaction a Delegate action is fine.
	tx := sampleTx()
	tx.Actions = []Action{inner}
	b := encodeOrFail(t, tx)
	if got, err := DecodeTransaction(b); err != nil || got.Actions[0].Kind() != KindDelegate {
		t.Fatalf("%v %v", got, err)
	}
}

func TestEncodeRefusesInvalidValues(t *testing.T) {
	cases := map[string]Action{
		"nil":                   nil,
		"unset permission":      AddKey{PublicKey: testKey(1)},
		"both permissions":      AddKey{AccessKey: AccessKey{Permission: AccessKeyPermission{FullAccess: true, FunctionCall: &FunctionCallPermission{}}}},
		"method not UTF-8":      FunctionCall{MethodName: "\xff"},
		"method name not UTF-8": AddKey{AccessKey: AccessKey{Permission: AccessKeyPermission{FunctionCall: &FunctionCallPermission{MethodNames: []string{"\xc3"}}}}},
		"beneficiary not UTF-8": DeleteAccount{BeneficiaryID: "\xfe"},
	}
	for name, a := range cases {
		tx := sampleTx()
		tx.Actions = []Action{a}
		if b, err := tx.Encode(); err == nil {
			t.Errorf("%s: encoded as %x", name, b)
		}
	}
	tx := sampleTx()
	tx.SignerID = "\xff"
	if _, err := tx.Encode(); err == nil {
		t.Error("signer id not UTF-8: encoded")
	}
}

func TestRoundTripEveryKind(t *testing.T) {
	allowance := U128From64(77)
	sd := SignedDelegateAction{
		DelegateAction: DelegateAction{
			SenderID: "alice.near", ReceiverID: "app.near", Nonce: 3, MaxBlockHeight: 4, PublicKey: testKey(5),
			Actions: []Action{CreateAccount{}, DeleteKey{PublicKey: testKey(6)}},
		},
		Signature: Signature{1, 2, 3},
	}
	tx := sampleTx()
	tx.Actions = []Action{
		CreateAccount{},
		DeployContract{Code: []byte{0, 'a', 's', 'm'}},
		FunctionCall{MethodName: "go", Args: []byte(`{}`), Gas: 1 << 60, Deposit: U128{hi: 1, lo: 2}},
		Transfer{Deposit: U128{hi: ^uint64(0), lo: ^uint64(0)}},
		Stake{Amount: U128From64(9), PublicKey: testKey(7)},
		AddKey{PublicKey: testKey(8), AccessKey: AccessKey{Nonce: 1, Permission: AccessKeyPermission{FullAccess: true}}},
		AddKey{PublicKey: testKey(9), AccessKey: AccessKey{Permission: AccessKeyPermission{FunctionCall: &FunctionCallPermission{
			Allowance: &allowance, ReceiverID: "app.near", MethodNames: []string{"a", "b"},
		}}}},
		DeleteKey{PublicKey: testKey(10)},
		DeleteAccount{BeneficiaryID: "bob.near"},
		sd,
	}
	b := encodeOrFail(t, tx)
	got, err := DecodeTransaction(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, tx) {
		t.Fatalf("decoded\n %#v\nwant\n %#v", got, tx)
	}
	if again := encodeOrFail(t, *got); !bytes.Equal(again, b) {
		t.Fatalf("re-encoded differently:\n%x\n%x", again, b)
	}
}
