package near

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// relayerSecret is the test key "relayer" of the golden vectors (from a fixed seed).
const (
	relayerSecret = "ed25519:38ag65dE7hYCWcNb8C2NSrg4PcxzKvvbMS2HQ7teZBRP2oPw8XRGGQ1hK3ZyUVggo95LQhMpZ7tKcbroiLbLnWR8"
	relayerPublic = "ed25519:5pZb3yzkUyCnkRnMLaGP9SLVYJTE73P7Fa3YkMfG9ZiA"
)

func TestParseKeyPair(t *testing.T) {
	kp, err := ParseKeyPair(relayerSecret)
	if err != nil {
		t.Fatal(err)
	}
	if kp.PublicKey().String() != relayerPublic {
		t.Fatalf("public key %s", kp.PublicKey())
	}
	if upper, err := ParseKeyPair("ED25519" + strings.TrimPrefix(relayerSecret, "ed25519")); err != nil || upper.PublicKey() != kp.PublicKey() {
		t.Fatalf("upper-case curve: %v", err)
	}

	body := strings.TrimPrefix(relayerSecret, "ed25519:")
	raw := mustBase58(t, body)
	swapped := append(append([]byte(nil), raw[:32]...), raw[32:]...)
	swapped[40] ^= 1 // a public half the seed does not derive
	bad := map[string]string{
		"no curve":            body,
		"other curve":         "secp256k1:" + body,
		"not base58":          "ed25519:" + body[:20] + "0OIl" + body[24:],
		"seed only":           "ed25519:" + encodeBase58(raw[:32]),
		"too long":            "ed25519:" + encodeBase58(append(raw, 1)),
		"foreign public half": "ed25519:" + encodeBase58(swapped),
	}
	for name, s := range bad {
		_, err := ParseKeyPair(s)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		// Not the secret, nor any piece of it long enough to matter.
		for _, piece := range []string{body, body[:12], body[20:32], encodeBase58(raw[:32])[:12]} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("%s: the error %q shows the secret", name, err)
			}
		}
	}
}

func TestKeyPairNeverPrintsItsSecret(t *testing.T) {
	kp, err := ParseKeyPair(relayerSecret)
	if err != nil {
		t.Fatal(err)
	}
	seed := mustBase58(t, strings.TrimPrefix(relayerSecret, "ed25519:"))[:32]
	holder := struct {
		Key  *KeyPair
		Copy KeyPair
	}{kp, *kp}
	outputs := []string{fmt.Sprint(kp), fmt.Sprint(*kp), fmt.Sprint(holder)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		outputs = append(outputs, fmt.Sprintf(verb, kp), fmt.Sprintf(verb, *kp), fmt.Sprintf(verb, holder))
	}
	if b, err := json.Marshal(holder); err == nil {
		outputs = append(outputs, string(b))
	}
	for _, out := range outputs {
		if strings.Contains(out, strings.TrimPrefix(relayerSecret, "ed25519:")) ||
			strings.Contains(out, strings.TrimSuffix(fmt.Sprint(seed[:8]), "]")) || strings.Contains(out, fmt.Sprintf("%x", seed[:8])) ||
			strings.Contains(out, encodeBase58(seed)[:10]) {
			t.Errorf("the secret shows in %q", out)
		}
	}
	if !strings.Contains(fmt.Sprint(kp), relayerPublic) {
		t.Errorf("%v does not name its public key", kp)
	}
}

func TestSignAndVerify(t *testing.T) {
	kp, _ := ParseKeyPair(relayerSecret)
	tx := sampleTx()
	if _, _, err := SignTransaction(tx, kp); err == nil {
		t.Fatal("signed with a key that is not the transaction's")
	}
	tx.PublicKey = kp.PublicKey()
	st, h, err := SignTransaction(tx, kp)
	if err != nil {
		t.Fatal(err)
	}
	if vh, err := st.Verify(); err != nil || vh != h {
		t.Fatalf("%s %v", vh, err)
	}
	if !kp.PublicKey().Verify(h[:], st.Signature) || kp.PublicKey().Verify([]byte("other"), st.Signature) {
		t.Fatal("PublicKey.Verify")
	}
	tampered := *st
	tampered.Transaction.Nonce++
	if _, err := tampered.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a changed nonce verified: %v", err)
	}

	da := DelegateAction{SenderID: "alice.near", ReceiverID: "app.near", Nonce: 1, MaxBlockHeight: 100, PublicKey: testKey(1)}
	if _, _, err := SignDelegateAction(da, kp); err == nil {
		t.Fatal("signed a delegate action with a key that is not its own")
	}
	da.PublicKey = kp.PublicKey()
	sd, dh, err := SignDelegateAction(da, kp)
	if err != nil {
		t.Fatal(err)
	}
	if vh, err := sd.Verify(); err != nil || vh != dh {
		t.Fatalf("%s %v", vh, err)
	}
	// The NEP-461 prefix keeps a delegate signature from passing for a plain hash's.
	plain, _ := da.Encode()
	if kp.PublicKey().Verify(sha(plain), sd.Signature) {
		t.Fatal("the delegate signature covers the unprefixed bytes")
	}
	sd.DelegateAction.MaxBlockHeight++
	if _, err := sd.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a changed max_block_height verified: %v", err)
	}
}

// TestDocsSignedTransaction decodes the signed transaction of NEAR's RPC documentation
// (docs.near.org, "Send transaction" example), signed by someone else's tooling, and checks
// its signature against the hash this package computes.
func TestDocsSignedTransaction(t *testing.T) {
	const docs = "DgAAAHNlbmRlci50ZXN0bmV0AOrmAai64SZOv9e/naX4W15pJx0GAap35wTT1T/DwcbbDwAAAAAAAAAQAAAAcmVjZWl2ZXIudGVzdG5ldNMnL7URB1cxPOu3G8jTqlEwlcasagIbKlAJlF5ywVFLAQAAAAMAAACh7czOG8LTAAAAAAAAAGQcOG03xVSFQFjoagOb4NBBqWhERnnz45LY4+52JgZhm1iQKz7qAdPByrGFDQhQ2Mfga8RlbysuQ8D8LlA6bQE="
	raw, err := base64.StdEncoding.DecodeString(docs)
	if err != nil {
		t.Fatal(err)
	}
	st, err := DecodeSignedTransaction(raw)
	if err != nil {
		t.Fatal(err)
	}
	tx := st.Transaction
	if tx.SignerID != "sender.testnet" || tx.ReceiverID != "receiver.testnet" || tx.Nonce != 15 ||
		tx.PublicKey.String() != "ed25519:Gowpa4kXNyTMRKgt5W7147pmcc2PxiFic8UHW9rsNvJ6" || len(tx.Actions) != 1 ||
		tx.Actions[0] != (Transfer{Deposit: mustU128(t, "1000000000000000000000000")}) {
		t.Fatalf("%+v", tx)
	}
	if _, err := st.Verify(); err != nil {
		t.Fatal(err)
	}
	if again, err := st.Encode(); err != nil || !bytes.Equal(again, raw) {
		t.Fatalf("re-encoded differently: %v", err)
	}
}

func TestParsePublicKeyAndHash(t *testing.T) {
	k, err := ParsePublicKey(relayerPublic)
	if err != nil || k.String() != relayerPublic {
		t.Fatalf("%s %v", k, err)
	}
	if k2, err := ParsePublicKey("ED25519:" + strings.TrimPrefix(relayerPublic, "ed25519:")); err != nil || k2 != k {
		t.Fatalf("upper-case curve: %v", err)
	}
	for _, s := range []string{"", "ed25519:", strings.TrimPrefix(relayerPublic, "ed25519:"), "secp256k1:" + strings.TrimPrefix(relayerPublic, "ed25519:"),
		"ed25519:0OIl", relayerPublic + "1", "ed25519:" + encodeBase58(make([]byte, 31))} {
		if _, err := ParsePublicKey(s); err == nil {
			t.Errorf("public key %q accepted", s)
		}
	}
	zero := Hash{}
	if zero.String() != "11111111111111111111111111111111" {
		t.Fatalf("zero hash %s", zero)
	}
	if h, err := ParseHash(zero.String()); err != nil || h != zero {
		t.Fatalf("%v %v", h, err)
	}
	for _, s := range []string{"", "1111", "ed25519:11111111111111111111111111111111", "0OIl"} {
		if _, err := ParseHash(s); err == nil {
			t.Errorf("hash %q accepted", s)
		}
	}
	var sig Signature
	if err := sig.UnmarshalText([]byte("ed25519:" + encodeBase58(make([]byte, 63)))); err == nil {
		t.Error("a 63-byte signature accepted")
	}
}
