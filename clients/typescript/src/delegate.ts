// NEP-366 signed delegate actions (meta transactions), which the relayer takes as the base64 of
// their borsh bytes. The client accepts them in three forms: the bytes (or their base64), a
// plain object in NEAR's JSON form (the form the relayer API uses for actions), or a
// near-api-js SignedDelegate object — encoded here, so that near-api-js stays optional.
//
// Borsh of a SignedDelegateAction: sender_id, receiver_id, actions (Vec<Action>, none of them
// a Delegate), nonce u64, max_block_height u64, public_key, then the signature. A key is a u8
// key type (0: ed25519) and 32 bytes; a signature the type and 64 bytes. The relayer accepts
// ed25519 only.

import { BorshWriter } from './borsh.js';
import { buffer, concat, fromBase58, fromBase64Any, toBase58, toBase64 } from './encoding.js';
import { clientError } from './errors.js';
import { signEd25519 } from './keys.js';
import type { NearAction } from './relayer.js';

/** An action of a delegate action, in NEAR's JSON form: the relayer's five, and the three it never builds itself. */
export type DelegateActionItem =
  | NearAction
  | { DeployContract: { code: string } }
  | { Stake: { stake: string; public_key: string } }
  | { DeleteAccount: { beneficiary_id: string } };

/** A whole number for a u64 or u128: bigint, a safe integer, or its decimal string. */
export type Amount = bigint | number | string;

/** A delegate action in plain form. */
export interface DelegateAction {
  senderId: string;
  receiverId: string;
  actions: DelegateActionItem[];
  /** The sender's access key nonce to use: above its current one. */
  nonce: Amount;
  /** The last block height the relayer may land it at. */
  maxBlockHeight: Amount;
  /** The sender's access key: "ed25519:<base58>" or its 32 bytes. */
  publicKey: string | Uint8Array;
}

/** A signed delegate action in plain form. */
export interface SignedDelegate {
  delegateAction: DelegateAction;
  /** The sender's Ed25519 signature: "ed25519:<base58>" or its 64 bytes. */
  signature: string | Uint8Array;
}

/**
 * A signed delegate action as submitDelegate takes it: its borsh bytes, their base64, a
 * SignedDelegate, or a near-api-js SignedDelegate object (typed loosely on purpose: its
 * classes differ between near-api-js versions, and near-api-js is not a dependency).
 */
export type SignedDelegateInput = Uint8Array | string | SignedDelegate | { delegateAction: object; signature: object };

/** The NEP-461 tag of delegate actions: 2^30 + 366. */
const DELEGATE_PREFIX = 2 ** 30 + 366;

/** The base64 (standard, padded) of a signed delegate action's borsh bytes, as the relayer takes it. */
export function signedDelegateBase64(input: SignedDelegateInput): string {
  if (typeof input === 'string') {
    const b = fromBase64Any(input);
    if (!b) throw clientError('invalid_argument', 'shardkeeper: a signed delegate given as a string must be base64');
    return toBase64(b);
  }
  return toBase64(input instanceof Uint8Array ? input : encodeSignedDelegate(input));
}

/** The borsh bytes of a signed delegate action (plain or near-api-js form). */
export function encodeSignedDelegate(sd: SignedDelegate | { delegateAction: object; signature: object }): Uint8Array {
  const w = new BorshWriter();
  writeDelegate(w, sd.delegateAction as Loose);
  return w.u8(0).raw(signatureBytes(sd.signature)).done();
}

/** The borsh bytes of a delegate action, without the NEP-461 prefix. */
export function encodeDelegateAction(da: DelegateAction | object): Uint8Array {
  const w = new BorshWriter();
  writeDelegate(w, da as Loose);
  return w.done();
}

/**
 * The hash the sender signs: SHA-256 of the u32 NEP-461 prefix and the delegate action's
 * borsh bytes (nearcore's get_nep461_hash), so that a delegate's signature can never pass for
 * a transaction's.
 */
export async function delegateHash(da: DelegateAction | object): Promise<Uint8Array> {
  const msg = concat(new BorshWriter().u32(DELEGATE_PREFIX).done(), encodeDelegateAction(da));
  return new Uint8Array(await crypto.subtle.digest('SHA-256', buffer(msg)));
}

/** Signs a delegate action with the sender's Ed25519 key (Web Crypto). */
export async function signDelegate(da: DelegateAction, privateKey: CryptoKey): Promise<SignedDelegate> {
  const sig = await signEd25519(privateKey, await delegateHash(da));
  return { delegateAction: da, signature: `ed25519:${toBase58(sig)}` };
}

// The input objects are walked loosely: plain objects and near-api-js classes alike.
type Loose = Record<string, unknown>;

function writeDelegate(w: BorshWriter, da: Loose): void {
  const actions = da['actions'];
  if (!Array.isArray(actions)) throw bad('a delegate action has no actions');
  w.string(str(da['senderId'], 'senderId')).string(str(da['receiverId'], 'receiverId'));
  w.u32(actions.length);
  for (const a of actions) writeAction(w, a);
  w.u64(amount(da['nonce'], 'nonce'));
  w.u64(amount(da['maxBlockHeight'], 'maxBlockHeight'));
  w.u8(0).raw(publicKeyBytes(da['publicKey']));
}

/** Writes one action, in NEAR's JSON form ({"Transfer": …}) or near-api-js's ({transfer: …}). */
function writeAction(w: BorshWriter, a: unknown): void {
  if (a === 'CreateAccount') {
    w.u8(0);
    return;
  }
  if (a === null || typeof a !== 'object') throw bad(`an action is not one: ${String(a)}`);
  const o = a as Loose;
  const json = (k: string): Loose | undefined => (k in o ? ((o[k] ?? {}) as Loose) : undefined);
  let b: Loose | undefined;
  if ((b = json('CreateAccount') ?? json('createAccount'))) w.u8(0);
  else if ((b = json('DeployContract'))) w.u8(1).bytes(base64(b['code'], 'code'));
  else if ((b = json('deployContract'))) w.u8(1).bytes(byteArray(b['code'], 'code'));
  else if ((b = json('FunctionCall'))) {
    w.u8(2).string(str(b['method_name'], 'method_name')).bytes(base64(b['args'], 'args'));
    w.u64(amount(b['gas'], 'gas')).u128(amount(b['deposit'], 'deposit'));
  } else if ((b = json('functionCall'))) {
    w.u8(2).string(str(b['methodName'], 'methodName')).bytes(byteArray(b['args'], 'args'));
    w.u64(amount(b['gas'], 'gas')).u128(amount(b['deposit'], 'deposit'));
  } else if ((b = json('Transfer') ?? json('transfer'))) w.u8(3).u128(amount(b['deposit'], 'deposit'));
  else if ((b = json('Stake') ?? json('stake'))) {
    w.u8(4).u128(amount(b['stake'], 'stake')).u8(0).raw(publicKeyBytes(b['public_key'] ?? b['publicKey']));
  } else if ((b = json('AddKey') ?? json('addKey'))) {
    w.u8(5).u8(0).raw(publicKeyBytes(b['public_key'] ?? b['publicKey']));
    writeAccessKey(w, (b['access_key'] ?? b['accessKey']) as Loose);
  } else if ((b = json('DeleteKey') ?? json('deleteKey'))) w.u8(6).u8(0).raw(publicKeyBytes(b['public_key'] ?? b['publicKey']));
  else if ((b = json('DeleteAccount'))) w.u8(7).string(str(b['beneficiary_id'], 'beneficiary_id'));
  else if ((b = json('deleteAccount'))) w.u8(7).string(str(b['beneficiaryId'], 'beneficiaryId'));
  else throw bad(`an action the relayer does not take in a delegate: ${Object.keys(o).filter((k) => k !== 'enum').join(', ')}`);
}

function writeAccessKey(w: BorshWriter, ak: Loose | undefined): void {
  if (!ak || typeof ak !== 'object') throw bad('AddKey without an access key');
  w.u64(amount(ak['nonce'] ?? 0, 'access key nonce'));
  const p = ak['permission'] as unknown;
  if (p === 'FullAccess' || (typeof p === 'object' && p !== null && ('fullAccess' in p || 'FullAccess' in p))) {
    w.u8(1);
    return;
  }
  if (typeof p !== 'object' || p === null) throw bad('an access key permission is not one');
  const fc = ((p as Loose)['FunctionCall'] ?? (p as Loose)['functionCall']) as Loose | undefined;
  if (!fc) throw bad('an access key permission is not FullAccess or FunctionCall');
  const allowance = fc['allowance'];
  w.u8(0);
  if (allowance === null || allowance === undefined) w.u8(0);
  else w.u8(1).u128(amount(allowance, 'allowance'));
  w.string(str(fc['receiver_id'] ?? fc['receiverId'], 'receiver_id'));
  const methods = fc['method_names'] ?? fc['methodNames'] ?? [];
  if (!Array.isArray(methods)) throw bad('method_names is not a list');
  w.u32(methods.length);
  for (const m of methods) w.string(str(m, 'a method name'));
}

function bad(message: string): Error {
  return clientError('invalid_argument', `shardkeeper: signed delegate: ${message}`);
}

function str(v: unknown, what: string): string {
  if (typeof v !== 'string') throw bad(`${what} is not a string`);
  return v;
}

/** A whole number from bigint, number, decimal string or a BN-like object (toString()). */
function amount(v: unknown, what: string): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  const s = typeof v === 'string' ? v : v !== null && typeof v === 'object' ? String(v) : undefined;
  if (s === undefined || !/^\d+$/.test(s)) throw bad(`${what} is not a whole number: ${String(v)}`);
  return BigInt(s);
}

function base64(v: unknown, what: string): Uint8Array {
  const b = typeof v === 'string' ? fromBase64Any(v) : undefined;
  if (!b) throw bad(`${what} is not base64`);
  return b;
}

function byteArray(v: unknown, what: string): Uint8Array {
  if (v instanceof Uint8Array) return v;
  if (Array.isArray(v)) return Uint8Array.from(v as number[]);
  throw bad(`${what} is not bytes`);
}

/** The 32 bytes of an ed25519 public key in any of the forms near-api-js versions use. */
function publicKeyBytes(k: unknown): Uint8Array {
  return keyBytes(k, 32, 'ed25519Key', 'a public key');
}

function signatureBytes(s: unknown): Uint8Array {
  return keyBytes(s, 64, 'ed25519Signature', 'a signature');
}

function keyBytes(k: unknown, n: number, variant: string, what: string): Uint8Array {
  let raw: Uint8Array | undefined;
  if (typeof k === 'string') {
    if (!k.startsWith('ed25519:')) throw bad(`${what} is not ed25519 (the relayer takes ed25519 only)`);
    raw = fromBase58(k.slice('ed25519:'.length));
  } else if (k instanceof Uint8Array) {
    raw = k;
  } else if (k !== null && typeof k === 'object') {
    const o = k as Loose;
    // near-api-js ≥ 5: an enum object {ed25519Key: {keyType, data}}; older: {keyType, data}.
    const inner = (o[variant] ?? o) as Loose;
    if (inner['keyType'] !== undefined && inner['keyType'] !== 0) throw bad(`${what} is not ed25519 (the relayer takes ed25519 only)`);
    const data = inner['data'];
    raw = data instanceof Uint8Array ? data : Array.isArray(data) ? Uint8Array.from(data as number[]) : undefined;
  }
  if (!raw || raw.length !== n) throw bad(`${what} is not ${n} bytes of ed25519`);
  return raw;
}
