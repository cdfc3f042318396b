package near

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const testPK = "ed25519:DfFXBY7TwY6J9FszqT7EcatMvN6p2FidQbCzmZw4FLPw"

func TestParseAction(t *testing.T) {
	pk, err := ParsePublicKey(testPK)
	if err != nil {
		t.Fatal(err)
	}
	allowance := U128From64(250)
	cases := []struct {
		in   string
		want Action
	}{
		{`"CreateAccount"`, CreateAccount{}},
		{`{"CreateAccount":{}}`, CreateAccount{}},
		{`{"Transfer":{"deposit":"1000000000000000000000000"}}`, Transfer{Deposit: mustU128(t, "1000000000000000000000000")}},
		{`{"FunctionCall":{"method_name":"ft_transfer","args":"eyJhIjoxfQ==","gas":30000000000000,"deposit":"1"}}`,
			FunctionCall{MethodName: "ft_transfer", Args: []byte(`{"a":1}`), Gas: 30000000000000, Deposit: U128From64(1)}},
		{`{"FunctionCall":{"method_name":"ping","args":"","gas":18446744073709551615,"deposit":"0"}}`,
			FunctionCall{MethodName: "ping", Args: []byte{}, Gas: 1<<64 - 1}},
		{`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":"FullAccess"}}}`,
			AddKey{PublicKey: pk, AccessKey: AccessKey{Permission: AccessKeyPermission{FullAccess: true}}}},
		{`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":3,"permission":{"FunctionCall":{"allowance":"250","receiver_id":"app.near","method_names":["a","b"]}}}}}`,
			AddKey{PublicKey: pk, AccessKey: AccessKey{Nonce: 3, Permission: AccessKeyPermission{FunctionCall: &FunctionCallPermission{
				Allowance: &allowance, ReceiverID: "app.near", MethodNames: []string{"a", "b"}}}}}},
		{`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":{"FunctionCall":{"allowance":null,"receiver_id":"app.near","method_names":[]}}}}}`,
			AddKey{PublicKey: pk, AccessKey: AccessKey{Permission: AccessKeyPermission{FunctionCall: &FunctionCallPermission{
				ReceiverID: "app.near", MethodNames: []string{}}}}}},
		{`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":{"FunctionCall":{"receiver_id":"app.near","method_names":[]}}}}}`,
			AddKey{PublicKey: pk, AccessKey: AccessKey{Permission: AccessKeyPermission{FunctionCall: &FunctionCallPermission{
				ReceiverID: "app.near", MethodNames: []string{}}}}}},
		{`{"DeleteKey":{"public_key":"` + testPK + `"}}`, DeleteKey{PublicKey: pk}},
	}
	for _, tc := range cases {
		got, err := ParseAction([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", tc.in, got, tc.want)
		}
		// MarshalJSON writes the form back (CreateAccount in its short form).
		out, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseAction(out)
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("%s: round trip through %s: %#v, %v", tc.in, out, back, err)
		}
	}
}

func mustU128(t *testing.T, s string) U128 {
	t.Helper()
	v, err := ParseU128(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseActionRefuses(t *testing.T) {
	unsupported := []string{
		`"DeleteAccount"`,
		`"Foo"`,
		`{"DeployContract":{"code":"AGFzbQ=="}}`,
		`{"Stake":{"stake":"1","public_key":"` + testPK + `"}}`,
		`{"DeleteAccount":{"beneficiary_id":"bob.near"}}`,
		`{"Delegate":{"delegate_action":{},"signature":"ed25519:1"}}`,
		`{"DeployGlobalContract":{"code":""}}`,
		`{"transfer":{"deposit":"1"}}`,
	}
	for _, in := range unsupported {
		if a, err := ParseAction([]byte(in)); !errors.Is(err, ErrUnsupportedAction) {
			t.Errorf("%s: %v, %v; want ErrUnsupportedAction", in, a, err)
		}
	}
	malformed := []string{
		``,
		`null`,
		`42`,
		`[]`,
		`{}`,
		`{"Transfer":{"deposit":"1"},"CreateAccount":{}}`,
		`{"CreateAccount":{"x":1}}`,
		`{"Transfer":{}}`,
		`{"Transfer":{"deposit":1}}`,
		`{"Transfer":{"deposit":"-1"}}`,
		`{"Transfer":{"deposit":"1.5"}}`,
		`{"Transfer":{"deposit":"340282366920938463463374607431768211456"}}`,
		`{"Transfer":{"deposit":"1","extra":true}}`,
		`{"Transfer":{"Deposit":"1"}}`,
		`{"FunctionCall":{"Method_Name":"m","args":"","gas":1,"deposit":"0"}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"Nonce":0,"permission":"FullAccess"}}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":{"FunctionCall":{"Receiver_ID":"a.near","method_names":[]}}}}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":{"functionCall":{"receiver_id":"a.near","method_names":[]}}}}}`,
		`{"Transfer":{"deposit":"1"}} trailing`,
		`{"FunctionCall":{"method_name":"m","args":"","gas":"5","deposit":"0"}}`,
		`{"FunctionCall":{"method_name":"m","args":"","gas":1.5,"deposit":"0"}}`,
		`{"FunctionCall":{"method_name":"m","args":"","gas":-1,"deposit":"0"}}`,
		`{"FunctionCall":{"method_name":"m","args":"","gas":18446744073709551616,"deposit":"0"}}`,
		`{"FunctionCall":{"method_name":"m","args":"not base64!","gas":1,"deposit":"0"}}`,
		`{"FunctionCall":{"method_name":"m","args":"eyJhIjoxfQ","gas":1,"deposit":"0"}}`,
		`{"FunctionCall":{"args":"","gas":1,"deposit":"0"}}`,
		`{"FunctionCall":{"method_name":"m","gas":1,"deposit":"0"}}`,
		`{"FunctionCall":{"method_name":"m","args":"","deposit":"0"}}`,
		`{"FunctionCall":{"method_name":"m","args":"","gas":1}}`,
		`{"AddKey":{"public_key":"` + testPK + `"}}`,
		`{"AddKey":{"access_key":{"nonce":0,"permission":"FullAccess"}}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"permission":"FullAccess"}}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0}}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":"Full"}}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":{"FunctionCall":{"method_names":[]}}}}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":{"FunctionCall":{"receiver_id":"a.near"}}}}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":{"FunctionCall":{"receiver_id":"a.near","method_names":[],"x":1}}}}}`,
		`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":{"FullAccess":{}}}}}`,
		`{"AddKey":{"public_key":"secp256k1:` + strings.Repeat("1", 40) + `","access_key":{"nonce":0,"permission":"FullAccess"}}}`,
		`{"DeleteKey":{}}`,
		`{"DeleteKey":{"public_key":"DfFXBY7TwY6J9FszqT7EcatMvN6p2FidQbCzmZw4FLPw"}}`,
		`{"DeleteKey":{"public_key":"ed25519:0OIl"}}`,
	}
	for _, in := range malformed {
		if a, err := ParseAction([]byte(in)); err == nil || errors.Is(err, ErrUnsupportedAction) {
			t.Errorf("%s: %v, %v; want a malformation error", in, a, err)
		}
	}
}

func TestParseActions(t *testing.T) {
	as, err := ParseActions([]byte(`["CreateAccount",{"Transfer":{"deposit":"5"}}]`))
	if err != nil || len(as) != 2 || as[0].Kind() != KindCreateAccount || as[1] != (Transfer{Deposit: U128From64(5)}) {
		t.Fatalf("%#v %v", as, err)
	}
	if _, err := ParseActions([]byte(`["CreateAccount",{"Stake":{}}]`)); !errors.Is(err, ErrUnsupportedAction) || !strings.Contains(err.Error(), "action 1") {
		t.Fatalf("%v", err)
	}
	if _, err := ParseActions([]byte(`{"Transfer":{"deposit":"5"}}`)); err == nil {
		t.Fatal("an object taken for a list")
	}
	var req struct {
		Actions Actions `json:"actions"`
	}
	if err := json.Unmarshal([]byte(`{"actions":[{"DeleteKey":{"public_key":"`+testPK+`"}}]}`), &req); err != nil || len(req.Actions) != 1 {
		t.Fatalf("%#v %v", req, err)
	}
	if err := json.Unmarshal([]byte(`{"actions":[{"DeployContract":{"code":""}}]}`), &req); !errors.Is(err, ErrUnsupportedAction) {
		t.Fatalf("%v", err)
	}
}

func TestActionJSONForms(t *testing.T) {
	pk, _ := ParsePublicKey(testPK)
	cases := []struct {
		a    Action
		want string
	}{
		{CreateAccount{}, `"CreateAccount"`},
		{FunctionCall{MethodName: "m", Gas: 7}, `{"FunctionCall":{"method_name":"m","args":"","gas":7,"deposit":"0"}}`},
		{AddKey{PublicKey: pk, AccessKey: AccessKey{Permission: AccessKeyPermission{FunctionCall: &FunctionCallPermission{ReceiverID: "a.near"}}}},
			`{"AddKey":{"public_key":"` + testPK + `","access_key":{"nonce":0,"permission":{"FunctionCall":{"allowance":null,"receiver_id":"a.near","method_names":[]}}}}}`},
		{SignedDelegateAction{DelegateAction: DelegateAction{SenderID: "a.near", ReceiverID: "b.near", Nonce: 1, MaxBlockHeight: 2, PublicKey: pk}},
			`{"Delegate":{"delegate_action":{"sender_id":"a.near","receiver_id":"b.near","actions":[],"nonce":1,"max_block_height":2,"public_key":"` + testPK + `"},"signature":"ed25519:1111111111111111111111111111111111111111111111111111111111111111"}}`},
	}
	for _, tc := range cases {
		got, err := json.Marshal(tc.a)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, got, []byte(tc.want)) {
			t.Errorf("%T:\n got %s\nwant %s", tc.a, got, tc.want)
		}
	}
	if _, err := json.Marshal(AddKey{PublicKey: pk}); err == nil {
		t.Error("an unset permission marshalled")
	}
}
