package near

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// NEAR's JSON form of actions is serde's external tagging, as `tx` results show them:
//
//	"CreateAccount"
//	{"Transfer":{"deposit":"<yocto>"}}
//	{"FunctionCall":{"method_name":"…","args":"<base64>","gas":<int>,"deposit":"<yocto>"}}
//	{"AddKey":{"public_key":"ed25519:…","access_key":{"nonce":0,"permission":"FullAccess"}}}
//	{"AddKey":{…,"access_key":{"nonce":0,"permission":{"FunctionCall":{"allowance":"<yocto>"|null,"receiver_id":"…","method_names":[…]}}}}}
//	{"DeleteKey":{"public_key":"ed25519:…"}}
//
// Every action marshals to this form (DeployContract, Stake, DeleteAccount and Delegate too);
// ParseAction reads back only the five above, the ones an intent may carry.

// ParseAction parses one action in NEAR's JSON form. A kind other than CreateAccount,
// Transfer, FunctionCall, AddKey and DeleteKey wraps ErrUnsupportedAction; any other
// malformation (unknown or missing field, wrong type) is a plain error. Amounts must be
// decimal strings and gas a JSON integer.
func ParseAction(data []byte) (Action, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var name string
		if err := json.Unmarshal(data, &name); err != nil {
			return nil, fmt.Errorf("action: %w", err)
		}
		if name == KindCreateAccount.String() {
			return CreateAccount{}, nil
		}
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedAction, clip(name))
	}
	var tagged map[string]json.RawMessage
	if err := json.Unmarshal(data, &tagged); err != nil || tagged == nil {
		return nil, errors.New(`action: want "CreateAccount" or an object with one key naming the action`)
	}
	if len(tagged) != 1 {
		return nil, fmt.Errorf("action: want one key naming the action, got %d", len(tagged))
	}
	var name string
	for name = range tagged {
	}
	return parseTaggedAction(name, tagged[name])
}

func parseTaggedAction(name string, body json.RawMessage) (Action, error) {
	switch name {
	case "CreateAccount": // nearcore's own Action serializes the empty struct as {}
		var v struct{}
		if err := strictUnmarshal(body, &v); err != nil {
			return nil, fmt.Errorf("CreateAccount: %w", err)
		}
		return CreateAccount{}, nil
	case "Transfer":
		var v struct {
			Deposit *U128 `json:"deposit"`
		}
		if err := strictUnmarshal(body, &v); err != nil {
			return nil, fmt.Errorf("Transfer: %w", err)
		}
		if v.Deposit == nil {
			return nil, errors.New("Transfer: deposit is missing")
		}
		return Transfer{Deposit: *v.Deposit}, nil
	case "FunctionCall":
		var v struct {
			MethodName *string `json:"method_name"`
			Args       *string `json:"args"`
			Gas        *uint64 `json:"gas"`
			Deposit    *U128   `json:"deposit"`
		}
		if err := strictUnmarshal(body, &v); err != nil {
			return nil, fmt.Errorf("FunctionCall: %w", err)
		}
		if err := missing("FunctionCall", "method_name", v.MethodName == nil, "args", v.Args == nil,
			"gas", v.Gas == nil, "deposit", v.Deposit == nil); err != nil {
			return nil, err
		}
		args, err := base64.StdEncoding.Strict().DecodeString(*v.Args)
		if err != nil {
			return nil, fmt.Errorf("FunctionCall: args is not standard base64: %w", err)
		}
		return FunctionCall{MethodName: *v.MethodName, Args: args, Gas: *v.Gas, Deposit: *v.Deposit}, nil
	case "AddKey":
		var v struct {
			PublicKey *PublicKey      `json:"public_key"`
			AccessKey json.RawMessage `json:"access_key"`
		}
		if err := strictUnmarshal(body, &v); err != nil {
			return nil, fmt.Errorf("AddKey: %w", err)
		}
		if err := missing("AddKey", "public_key", v.PublicKey == nil, "access_key", v.AccessKey == nil); err != nil {
			return nil, err
		}
		var ak struct {
			Nonce      *uint64              `json:"nonce"`
			Permission *AccessKeyPermission `json:"permission"`
		}
		if err := strictUnmarshal(v.AccessKey, &ak); err != nil {
			return nil, fmt.Errorf("AddKey access_key: %w", err)
		}
		if err := missing("AddKey access_key", "nonce", ak.Nonce == nil, "permission", ak.Permission == nil); err != nil {
			return nil, err
		}
		return AddKey{PublicKey: *v.PublicKey, AccessKey: AccessKey{Nonce: *ak.Nonce, Permission: *ak.Permission}}, nil
	case "DeleteKey":
		var v struct {
			PublicKey *PublicKey `json:"public_key"`
		}
		if err := strictUnmarshal(body, &v); err != nil {
			return nil, fmt.Errorf("DeleteKey: %w", err)
		}
		if v.PublicKey == nil {
			return nil, errors.New("DeleteKey: public_key is missing")
		}
		return DeleteKey{PublicKey: *v.PublicKey}, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnsupportedAction, clip(name))
}

// ParseActions parses a JSON array of actions with ParseAction; errors name the index.
func ParseActions(data []byte) ([]Action, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("actions: want a JSON array: %w", err)
	}
	actions := make([]Action, 0, len(raw))
	for i, r := range raw {
		a, err := ParseAction(r)
		if err != nil {
			return nil, fmt.Errorf("action %d: %w", i, err)
		}
		actions = append(actions, a)
	}
	return actions, nil
}

// Actions is a list of actions that reads and writes NEAR's JSON form, for request and
// record structs. Unmarshalling follows ParseActions.
type Actions []Action

// UnmarshalJSON implements json.Unmarshaler.
func (a *Actions) UnmarshalJSON(data []byte) error {
	actions, err := ParseActions(data)
	if err != nil {
		return err
	}
	*a = actions
	return nil
}

// missing reports the first absent required field; pairs are (name, absent).
func missing(what string, pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1].(bool) {
			return fmt.Errorf("%s: %s is missing", what, pairs[i])
		}
	}
	return nil
}

// strictUnmarshal decodes one JSON object into v, a pointer to a struct whose fields all have
// json tags, refusing unknown fields and trailing data. Field names must match exactly:
// encoding/json would also take "Deposit" for "deposit", which nearcore's serde refuses.
// Nested objects are not checked; callers decode each level with its own call.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	t := reflect.TypeOf(v).Elem()
	for name := range fields {
		if !hasJSONField(t, name) {
			return fmt.Errorf("unknown field %s", clip(name))
		}
	}
	return nil
}

// hasJSONField reports whether struct type t has a field tagged json:"name".
func hasJSONField(t reflect.Type, name string) bool {
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag == name {
			return true
		}
	}
	return false
}

// MarshalJSON writes "CreateAccount".
func (CreateAccount) MarshalJSON() ([]byte, error) { return []byte(`"CreateAccount"`), nil }

// MarshalJSON writes {"DeployContract":{"code":"<base64>"}}.
func (a DeployContract) MarshalJSON() ([]byte, error) {
	return tagged(KindDeployContract, struct {
		Code []byte `json:"code"`
	}{a.Code})
}

// MarshalJSON writes {"FunctionCall":{"method_name","args":"<base64>","gas","deposit"}}.
func (a FunctionCall) MarshalJSON() ([]byte, error) {
	args := a.Args
	if args == nil {
		args = []byte{} // "" rather than null: nearcore's args are never null
	}
	return tagged(KindFunctionCall, struct {
		MethodName string `json:"method_name"`
		Args       []byte `json:"args"`
		Gas        uint64 `json:"gas"`
		Deposit    U128   `json:"deposit"`
	}{a.MethodName, args, a.Gas, a.Deposit})
}

// MarshalJSON writes {"Transfer":{"deposit":"<yocto>"}}.
func (a Transfer) MarshalJSON() ([]byte, error) {
	return tagged(KindTransfer, struct {
		Deposit U128 `json:"deposit"`
	}{a.Deposit})
}

// MarshalJSON writes {"Stake":{"stake":"<yocto>","public_key"}}.
func (a Stake) MarshalJSON() ([]byte, error) {
	return tagged(KindStake, struct {
		Stake     U128      `json:"stake"`
		PublicKey PublicKey `json:"public_key"`
	}{a.Amount, a.PublicKey})
}

// MarshalJSON writes {"AddKey":{"public_key","access_key":{"nonce","permission"}}}.
func (a AddKey) MarshalJSON() ([]byte, error) {
	type accessKey struct {
		Nonce      uint64              `json:"nonce"`
		Permission AccessKeyPermission `json:"permission"`
	}
	return tagged(KindAddKey, struct {
		PublicKey PublicKey `json:"public_key"`
		AccessKey accessKey `json:"access_key"`
	}{a.PublicKey, accessKey{a.AccessKey.Nonce, a.AccessKey.Permission}})
}

// MarshalJSON writes {"DeleteKey":{"public_key"}}.
func (a DeleteKey) MarshalJSON() ([]byte, error) {
	return tagged(KindDeleteKey, struct {
		PublicKey PublicKey `json:"public_key"`
	}{a.PublicKey})
}

// MarshalJSON writes {"DeleteAccount":{"beneficiary_id"}}.
func (a DeleteAccount) MarshalJSON() ([]byte, error) {
	return tagged(KindDeleteAccount, struct {
		BeneficiaryID string `json:"beneficiary_id"`
	}{a.BeneficiaryID})
}

// MarshalJSON writes {"Delegate":{"delegate_action":{…},"signature"}}.
func (s SignedDelegateAction) MarshalJSON() ([]byte, error) {
	d := s.DelegateAction
	actions := d.Actions
	if actions == nil {
		actions = []Action{}
	}
	type delegateAction struct {
		SenderID       string    `json:"sender_id"`
		ReceiverID     string    `json:"receiver_id"`
		Actions        []Action  `json:"actions"`
		Nonce          uint64    `json:"nonce"`
		MaxBlockHeight uint64    `json:"max_block_height"`
		PublicKey      PublicKey `json:"public_key"`
	}
	return tagged(KindDelegate, struct {
		DelegateAction delegateAction `json:"delegate_action"`
		Signature      Signature      `json:"signature"`
	}{delegateAction{d.SenderID, d.ReceiverID, actions, d.Nonce, d.MaxBlockHeight, d.PublicKey}, s.Signature})
}

// tagged writes {"<kind>": body}.
func tagged(kind ActionKind, body any) ([]byte, error) {
	return json.Marshal(map[string]any{kind.String(): body})
}

// functionCallPermissionJSON is the JSON body of a FunctionCall permission.
type functionCallPermissionJSON struct {
	Allowance   *U128     `json:"allowance"`
	ReceiverID  *string   `json:"receiver_id"`
	MethodNames *[]string `json:"method_names"`
}

// MarshalJSON writes "FullAccess" or {"FunctionCall":{"allowance","receiver_id","method_names"}}
// (allowance null when unlimited). A permission that is neither or both is an error.
func (p AccessKeyPermission) MarshalJSON() ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if p.FullAccess {
		return []byte(`"FullAccess"`), nil
	}
	fc := p.FunctionCall
	names := fc.MethodNames
	if names == nil {
		names = []string{}
	}
	return json.Marshal(map[string]any{"FunctionCall": functionCallPermissionJSON{fc.Allowance, &fc.ReceiverID, &names}})
}

// UnmarshalJSON reads the form MarshalJSON writes; allowance may be null or absent (unlimited),
// receiver_id and method_names are required.
func (p *AccessKeyPermission) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var name string
		if err := json.Unmarshal(data, &name); err != nil {
			return err
		}
		if name != "FullAccess" {
			return fmt.Errorf(`access key permission %s: want "FullAccess" or {"FunctionCall":{…}}`, clip(name))
		}
		*p = AccessKeyPermission{FullAccess: true}
		return nil
	}
	var v struct {
		FunctionCall json.RawMessage `json:"FunctionCall"`
	}
	if err := strictUnmarshal(data, &v); err != nil {
		return fmt.Errorf(`access key permission: want "FullAccess" or {"FunctionCall":{…}}: %w`, err)
	}
	if v.FunctionCall == nil {
		return errors.New(`access key permission: want "FullAccess" or {"FunctionCall":{…}}`)
	}
	fc := &functionCallPermissionJSON{}
	if err := strictUnmarshal(v.FunctionCall, fc); err != nil {
		return fmt.Errorf("access key permission FunctionCall: %w", err)
	}
	if err := missing("access key permission FunctionCall", "receiver_id", fc.ReceiverID == nil,
		"method_names", fc.MethodNames == nil); err != nil {
		return err
	}
	*p = AccessKeyPermission{FunctionCall: &FunctionCallPermission{
		Allowance: fc.Allowance, ReceiverID: *fc.ReceiverID, MethodNames: *fc.MethodNames,
	}}
	return nil
}
