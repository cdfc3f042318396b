// Signed notes (golang.org/x/mod/sumdb/note) and the C2SP tlog-checkpoint they carry: the form
// of a chain's checkpoints. The checks are those of note.NewVerifier, note.Open and the
// server's ParseCheckpoint, rule for rule, so that a checkpoint this client accepts is one
// `shardkeeper chain proof` accepts, and the reverse. Signatures are Ed25519, checked with
// Web Crypto.

import { ED25519, buffer, fromBase64Std, utf8 } from './encoding.js';
import { clientError } from './errors.js';

/** A log verifier key (`<name>+<hash>+<key>`, as `shardkeeper chain log-key` prints it), parsed. */
export interface LogKey {
  name: string;
  /** The key hash: the first 4 bytes of SHA-256(name ‖ "\n" ‖ key), big-endian. */
  hash: number;
  /** The raw 32-byte Ed25519 public key. */
  key: Uint8Array;
}

/** A checkpoint's body: the tree of the first `size` confirmed events of a chain. */
export interface Checkpoint {
  /** `<log key name>/<chain>`. */
  origin: string;
  size: number;
  /** The RFC 6962 root hash of the tree. */
  root: Uint8Array;
  /** The signed text (the body lines), as the signature covers it. */
  text: string;
}

const ALG_ED25519 = 1;

// Go's unicode.IsSpace: ASCII white space, U+0085, U+00A0 and the Unicode Z categories.
const SPACE = /[\t\n\v\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]/u;

function validName(name: string): boolean {
  return name !== '' && !SPACE.test(name) && !name.includes('+');
}

async function keyHash(name: string, key: Uint8Array): Promise<number> {
  const sum = new Uint8Array(await crypto.subtle.digest('SHA-256', buffer(new Uint8Array([...utf8(name + '\n'), ...key]))));
  return ((sum[0]! << 24) | (sum[1]! << 16) | (sum[2]! << 8) | sum[3]!) >>> 0;
}

/** Parses a log verifier key; fails with `invalid_log_key`. */
export async function parseLogKey(vkey: string): Promise<LogKey> {
  const bad = (why: string) => clientError('invalid_log_key', `shardkeeper: log key: ${why}`);
  const plus = vkey.indexOf('+');
  const name = plus < 0 ? vkey : vkey.slice(0, plus);
  const rest = plus < 0 ? '' : vkey.slice(plus + 1);
  const plus2 = rest.indexOf('+');
  const hash16 = plus2 < 0 ? rest : rest.slice(0, plus2);
  const key64 = plus2 < 0 ? '' : rest.slice(plus2 + 1);
  const key = fromBase64Std(key64);
  if (!/^[0-9a-fA-F]{8}$/.test(hash16) || !key || key.length === 0 || !validName(name)) throw bad('malformed verifier id');
  const hash = parseInt(hash16, 16) >>> 0;
  if (hash !== (await keyHash(name, key))) throw bad('invalid verifier hash');
  if (key[0] !== ALG_ED25519) throw bad('unknown verifier algorithm');
  if (key.length !== 33) throw bad('malformed verifier id');
  return { name, hash, key: key.slice(1) };
}

const SIG_PREFIX = '\u2014 '; // "— "
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Opens a signed note with one verifier key: the note must be well formed and carry a valid
 * signature by that key (signatures by other keys are ignored; a signature by that key that
 * does not verify rejects the note). Returns the signed text. Fails with `checkpoint_invalid`.
 */
export async function openNote(note: string | Uint8Array, key: LogKey): Promise<string> {
  const bad = (why: string) => clientError('checkpoint_invalid', `shardkeeper: checkpoint signature: ${why}`);
  let msg: string;
  if (typeof note === 'string') msg = note;
  else {
    try {
      msg = new TextDecoder('utf-8', { fatal: true }).decode(note);
    } catch {
      throw bad('malformed note');
    }
  }
  // Valid UTF-8 (a lone surrogate cannot be encoded) without control characters but newline.
  if (/[\u0000-\u0009\u000b-\u001f]/.test(msg) || LONE_SURROGATE.test(msg)) throw bad('malformed note');
  const split = msg.lastIndexOf('\n\n');
  if (split < 0) throw bad('malformed note');
  const text = msg.slice(0, split + 1);
  let sigs = msg.slice(split + 2);
  if (sigs.length === 0 || !sigs.endsWith('\n')) throw bad('malformed note');

  let verifier: CryptoKey | undefined;
  let verified = false;
  let count = 0;
  while (sigs.length > 0) {
    const nl = sigs.indexOf('\n');
    let line = sigs.slice(0, nl);
    sigs = sigs.slice(nl + 1);
    if (!line.startsWith(SIG_PREFIX)) throw bad('malformed note');
    line = line.slice(SIG_PREFIX.length);
    const sp = line.indexOf(' ');
    const name = sp < 0 ? line : line.slice(0, sp);
    const b64 = sp < 0 ? '' : line.slice(sp + 1);
    const sig = fromBase64Std(b64);
    if (!sig || !validName(name) || b64 === '' || sig.length < 5) throw bad('malformed note');
    const hash = ((sig[0]! << 24) | (sig[1]! << 16) | (sig[2]! << 8) | sig[3]!) >>> 0;
    if (++count > 100) throw bad('malformed note');
    if (name !== key.name || hash !== key.hash) continue; // another key's: not ours to judge
    if (verified) continue; // a repeated signature by the same key
    verifier ??= await crypto.subtle.importKey('raw', buffer(key.key), ED25519, false, ['verify']);
    const s = sig.subarray(4);
    const ok = s.length === 64 && (await crypto.subtle.verify(ED25519, verifier, buffer(s), buffer(utf8(text))));
    if (!ok) throw bad(`invalid signature for key ${key.name}+${key.hash.toString(16).padStart(8, '0')}`);
    verified = true;
  }
  if (!verified) throw bad('note has no verifiable signatures');
  return text;
}

/** Parses a checkpoint's text (origin, size, root; further lines are extensions). Fails with `checkpoint_invalid`. */
export function parseCheckpoint(text: string): Checkpoint {
  const bad = (why: string) => clientError('checkpoint_invalid', `shardkeeper: ${why}`);
  const lines = text.split('\n');
  if (lines.length < 4 || lines[0] === '') throw bad('not a checkpoint');
  const [origin, sizeLine, rootLine] = lines as [string, string, string];
  const size = /^[+-]?\d+$/.test(sizeLine) ? Number(sizeLine) : NaN;
  if (!Number.isSafeInteger(size) || size < 1) throw bad(`checkpoint size ${JSON.stringify(sizeLine)}`);
  const root = fromBase64Std(rootLine);
  if (!root || root.length !== 32) throw bad(`checkpoint root ${JSON.stringify(rootLine)}`);
  return { origin, size, root, text };
}

/** Opens a checkpoint signed by the log key (its verifier key string) and parses it. */
export async function openCheckpoint(signed: string | Uint8Array, logKey: string | LogKey): Promise<Checkpoint> {
  const key = typeof logKey === 'string' ? await parseLogKey(logKey) : logKey;
  return parseCheckpoint(await openNote(signed, key));
}
