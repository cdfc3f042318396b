package near

import (
	"errors"
	"fmt"
)

// ErrUnsupportedAction is wrapped when an action is of a kind this package does not handle:
// in JSON, any kind but the five the contract accepts; in borsh, the kinds NEAR added after
// Delegate (global contracts, gas keys, ...), which this package cannot re-encode faithfully.
var ErrUnsupportedAction = errors.New("unsupported action")

// ActionKind is the borsh discriminant of an action, as in nearcore's Action enum (and
// near-api-js's schema, which follows it).
type ActionKind uint8

// The action kinds this package encodes and decodes.
const (
	KindCreateAccount  ActionKind = 0
	KindDeployContract ActionKind = 1
	KindFunctionCall   ActionKind = 2
	KindTransfer       ActionKind = 3
	KindStake          ActionKind = 4
	KindAddKey         ActionKind = 5
	KindDeleteKey      ActionKind = 6
	KindDeleteAccount  ActionKind = 7
	KindDelegate       ActionKind = 8
)

var kindNames = [...]string{
	KindCreateAccount:  "CreateAccount",
	KindDeployContract: "DeployContract",
	KindFunctionCall:   "FunctionCall",
	KindTransfer:       "Transfer",
	KindStake:          "Stake",
	KindAddKey:         "AddKey",
	KindDeleteKey:      "DeleteKey",
	KindDeleteAccount:  "DeleteAccount",
	KindDelegate:       "Delegate",
}

// String returns NEAR's name of the kind, as its JSON form spells it.
func (k ActionKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// Action is one action of a transaction or delegate action. The set is closed: the types of
// this package (CreateAccount, DeployContract, FunctionCall, Transfer, Stake, AddKey,
// DeleteKey, DeleteAccount and SignedDelegateAction) are the only implementations.
type Action interface {
	Kind() ActionKind
	// encodeBody writes the action's fields (not its discriminant), or refuses values that
	// have no valid encoding before writing anything.
	encodeBody(e *encoder) error
}

// CreateAccount creates the transaction's receiver account.
type CreateAccount struct{}

// DeployContract deploys Code (wasm) to the receiver account.
type DeployContract struct {
	Code []byte
}

// FunctionCall calls MethodName on the receiver's contract with Args (bytes, usually JSON),
// Gas attached and Deposit (yoctoNEAR) transferred.
type FunctionCall struct {
	MethodName string
	Args       []byte
	Gas        uint64
	Deposit    U128
}

// Transfer sends Deposit (yoctoNEAR) to the receiver.
type Transfer struct {
	Deposit U128
}

// Stake stakes Amount (yoctoNEAR) with the validator key PublicKey.
type Stake struct {
	Amount    U128
	PublicKey PublicKey
}

// AddKey adds PublicKey to the receiver account with AccessKey's permission.
type AddKey struct {
	PublicKey PublicKey
	AccessKey AccessKey
}

// DeleteKey removes PublicKey from the receiver account.
type DeleteKey struct {
	PublicKey PublicKey
}

// DeleteAccount deletes the receiver account and sends its balance to BeneficiaryID.
type DeleteAccount struct {
	BeneficiaryID string
}

// AccessKey is the access key an AddKey action installs. Nonce is the key's starting nonce
// (nearcore replaces it by a block-height based one; clients send 0).
type AccessKey struct {
	Nonce      uint64
	Permission AccessKeyPermission
}

// AccessKeyPermission is either full access or a function-call permission: exactly one of
// FullAccess and FunctionCall is set. There is deliberately no default: a zero permission is
// refused by the encoder rather than read as full access.
type AccessKeyPermission struct {
	FullAccess   bool
	FunctionCall *FunctionCallPermission
}

// FunctionCallPermission lets a key call MethodNames (every method when empty) on ReceiverID,
// spending at most Allowance (unlimited when nil) on fees.
type FunctionCallPermission struct {
	Allowance   *U128
	ReceiverID  string
	MethodNames []string
}

// Borsh tags of AccessKeyPermission: FunctionCall comes first in nearcore's enum.
const (
	permissionFunctionCall = 0
	permissionFullAccess   = 1
)

func (CreateAccount) Kind() ActionKind  { return KindCreateAccount }
func (DeployContract) Kind() ActionKind { return KindDeployContract }
func (FunctionCall) Kind() ActionKind   { return KindFunctionCall }
func (Transfer) Kind() ActionKind       { return KindTransfer }
func (Stake) Kind() ActionKind          { return KindStake }
func (AddKey) Kind() ActionKind         { return KindAddKey }
func (DeleteKey) Kind() ActionKind      { return KindDeleteKey }
func (DeleteAccount) Kind() ActionKind  { return KindDeleteAccount }

func (CreateAccount) encodeBody(*encoder) error { return nil }

func (a DeployContract) encodeBody(e *encoder) error {
	if err := checkLen("DeployContract code", len(a.Code)); err != nil {
		return err
	}
	e.bytes(a.Code)
	return nil
}

func (a FunctionCall) encodeBody(e *encoder) error {
	if err := checkStr("FunctionCall method_name", a.MethodName); err != nil {
		return err
	}
	if err := checkLen("FunctionCall args", len(a.Args)); err != nil {
		return err
	}
	e.str(a.MethodName)
	e.bytes(a.Args)
	e.u64(a.Gas)
	e.u128(a.Deposit)
	return nil
}

func (a Transfer) encodeBody(e *encoder) error {
	e.u128(a.Deposit)
	return nil
}

func (a Stake) encodeBody(e *encoder) error {
	e.u128(a.Amount)
	a.PublicKey.encode(e)
	return nil
}

func (a AddKey) encodeBody(e *encoder) error {
	p := a.AccessKey.Permission
	if err := p.check(); err != nil {
		return fmt.Errorf("AddKey: %w", err)
	}
	a.PublicKey.encode(e)
	e.u64(a.AccessKey.Nonce)
	if p.FullAccess {
		e.u8(permissionFullAccess)
		return nil
	}
	fc := p.FunctionCall
	e.u8(permissionFunctionCall)
	if fc.Allowance == nil {
		e.u8(0)
	} else {
		e.u8(1)
		e.u128(*fc.Allowance)
	}
	e.str(fc.ReceiverID)
	e.u32(uint32(len(fc.MethodNames)))
	for _, m := range fc.MethodNames {
		e.str(m)
	}
	return nil
}

// check refuses a permission that is neither or both kinds, or carries strings borsh cannot.
func (p AccessKeyPermission) check() error {
	switch {
	case p.FullAccess && p.FunctionCall != nil:
		return errors.New("access key permission is both full access and function call")
	case p.FullAccess:
		return nil
	case p.FunctionCall == nil:
		return errors.New("access key permission is unset (neither full access nor function call)")
	}
	fc := p.FunctionCall
	if err := checkStr("access key receiver_id", fc.ReceiverID); err != nil {
		return err
	}
	if err := checkLen("access key method_names", len(fc.MethodNames)); err != nil {
		return err
	}
	for _, m := range fc.MethodNames {
		if err := checkStr("access key method name", m); err != nil {
			return err
		}
	}
	return nil
}

func (a DeleteKey) encodeBody(e *encoder) error {
	a.PublicKey.encode(e)
	return nil
}

func (a DeleteAccount) encodeBody(e *encoder) error {
	if err := checkStr("DeleteAccount beneficiary_id", a.BeneficiaryID); err != nil {
		return err
	}
	e.str(a.BeneficiaryID)
	return nil
}

// encodeActions writes a Vec<Action>. Inside a delegate action (nested), a Delegate action is
// refused: nearcore's NonDelegateAction cannot hold one, so no node could decode the bytes.
func encodeActions(e *encoder, actions []Action, nested bool) error {
	if err := checkLen("actions", len(actions)); err != nil {
		return err
	}
	e.u32(uint32(len(actions)))
	for i, a := range actions {
		if a == nil {
			return fmt.Errorf("action %d is nil", i)
		}
		if nested && a.Kind() == KindDelegate {
			return fmt.Errorf("action %d: a delegate action cannot contain another", i)
		}
		e.u8(uint8(a.Kind()))
		if err := a.encodeBody(e); err != nil {
			return fmt.Errorf("action %d: %w", i, err)
		}
	}
	return nil
}

// decodeActions reads a Vec<Action> (a Vec<NonDelegateAction> when nested).
func decodeActions(d *decoder, nested bool) []Action {
	n := d.count("actions", 1) // CreateAccount, the smallest action, is its tag alone
	actions := make([]Action, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		if a := decodeAction(d, nested); d.err == nil {
			actions = append(actions, a)
		}
	}
	return actions
}

func decodeAction(d *decoder, nested bool) Action {
	kind := ActionKind(d.u8("action tag"))
	if d.err != nil {
		return nil
	}
	switch kind {
	case KindCreateAccount:
		return CreateAccount{}
	case KindDeployContract:
		return DeployContract{Code: d.bytes("DeployContract code")}
	case KindFunctionCall:
		return FunctionCall{
			MethodName: d.str("FunctionCall method_name"),
			Args:       d.bytes("FunctionCall args"),
			Gas:        d.u64("FunctionCall gas"),
			Deposit:    d.u128("FunctionCall deposit"),
		}
	case KindTransfer:
		return Transfer{Deposit: d.u128("Transfer deposit")}
	case KindStake:
		return Stake{Amount: d.u128("Stake stake"), PublicKey: decodePublicKey(d, "Stake public_key")}
	case KindAddKey:
		return AddKey{PublicKey: decodePublicKey(d, "AddKey public_key"), AccessKey: decodeAccessKey(d)}
	case KindDeleteKey:
		return DeleteKey{PublicKey: decodePublicKey(d, "DeleteKey public_key")}
	case KindDeleteAccount:
		return DeleteAccount{BeneficiaryID: d.str("DeleteAccount beneficiary_id")}
	case KindDelegate:
		if nested {
			d.fail("a delegate action cannot contain another")
			return nil
		}
		return decodeSignedDelegate(d)
	}
	d.failWith(ErrUnsupportedAction, "action tag %d", uint8(kind))
	return nil
}

func decodeAccessKey(d *decoder) AccessKey {
	k := AccessKey{Nonce: d.u64("access key nonce")}
	switch tag := d.u8("access key permission"); tag {
	case permissionFullAccess:
		k.Permission.FullAccess = true
	case permissionFunctionCall:
		fc := &FunctionCallPermission{}
		if d.option("access key allowance") {
			v := d.u128("access key allowance")
			fc.Allowance = &v
		}
		fc.ReceiverID = d.str("access key receiver_id")
		n := d.count("access key method_names", 4) // each name is at least its u32 length
		fc.MethodNames = make([]string, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			fc.MethodNames = append(fc.MethodNames, d.str("access key method name"))
		}
		k.Permission.FunctionCall = fc
	default:
		d.fail("access key permission tag %d is neither 0 nor 1", tag)
	}
	return k
}
