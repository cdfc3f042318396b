// The chain's transparency log, checked offline: RFC 6962 hashing (SHA-256 through Web Crypto)
// and the verification of inclusion and consistency proofs (RFC 9162 §2.1.3.2 and §2.1.4.2),
// against checkpoints signed by the log key — the checks `shardkeeper chain proof` makes
// (services/chain CheckInclusion and CheckConsistency), in the same order.
//
// Tree sizes and indexes stay below 2^53, so they are numbers; JavaScript's bit operators work
// on 32 bits, hence the arithmetic halvings below.

import { buffer, bytesEqual, concat, fromBase64Std, utf8 } from './encoding.js';
import { clientError } from './errors.js';
import { type Checkpoint, type LogKey, openCheckpoint, parseLogKey } from './note.js';

/** SHA-256. */
async function sha256(b: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', buffer(b)));
}

/** The hash of a leaf: SHA-256(0x00 ‖ data). */
export function leafHash(data: Uint8Array): Promise<Uint8Array> {
  return sha256(concat(new Uint8Array([0]), data));
}

/** The hash of an interior node: SHA-256(0x01 ‖ left ‖ right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Promise<Uint8Array> {
  return sha256(concat(new Uint8Array([1]), left, right));
}

const odd = (n: number): boolean => n % 2 === 1;
const half = (n: number): number => Math.floor(n / 2);
const powerOfTwo = (n: number): boolean => n > 0 && 2 ** Math.round(Math.log2(n)) === n;

/** Whether proof shows that leaf is leaf `index` of the tree of `size` leaves whose root is root. */
export async function verifyInclusionProof(leaf: Uint8Array, index: number, size: number, proof: Uint8Array[], root: Uint8Array): Promise<boolean> {
  if (index < 0 || index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let h = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      h = await nodeHash(p, h);
      while (!odd(fn) && fn !== 0) {
        fn = half(fn);
        sn = half(sn);
      }
    } else {
      h = await nodeHash(h, p);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && bytesEqual(h, root);
}

/** Whether proof shows that the tree of `from` leaves (root fromRoot) is a prefix of the tree of `to` (root toRoot). */
export async function verifyConsistencyProof(from: number, to: number, proof: Uint8Array[], fromRoot: Uint8Array, toRoot: Uint8Array): Promise<boolean> {
  if (from < 1 || from > to) return false;
  if (from === to) return proof.length === 0 && bytesEqual(fromRoot, toRoot);
  if (proof.length === 0) return false;
  // When the old tree is a complete subtree of the new one, its root is the proof's start.
  const path = powerOfTwo(from) ? [fromRoot, ...proof] : proof;
  let fn = from - 1;
  let sn = to - 1;
  while (odd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr = path[0]!;
  let sr = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      while (!odd(fn) && fn !== 0) {
        fn = half(fn);
        sn = half(sn);
      }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && bytesEqual(fr, fromRoot) && bytesEqual(sr, toRoot);
}

/** The fields of a chain event that make its leaf (a ChainEvent as `chain(name).event(seq)` reads it). */
export interface AttestedEvent {
  seq: number;
  entityId: string;
  ver: number;
  cid: string;
  op: string;
  vis: string;
  ts: number;
  prevTx: string | null;
  prevCid: string | null;
}

/**
 * An event's leaf: the RFC 8785 canonical JSON of its attestation,
 * {pi, ver, cid, op, vis, ts, prev_tx, prev_cid, seq} with pi the entity id — members in
 * code-unit order, no white space; JSON.stringify writes strings and integers as RFC 8785 does.
 */
export function attestationLeaf(e: AttestedEvent): Uint8Array {
  const a: Record<string, string | number | null> = {
    pi: e.entityId,
    ver: e.ver,
    cid: e.cid,
    op: e.op,
    vis: e.vis,
    ts: e.ts,
    prev_tx: e.prevTx ?? null,
    prev_cid: e.prevCid ?? null,
    seq: e.seq,
  };
  const members = Object.keys(a)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${JSON.stringify(a[k])}`);
  return utf8(`{${members.join(',')}}`);
}

/** An inclusion proof (`chain(name).inclusionProof`): event seq in the tree of the first size events. */
export interface InclusionProof {
  seq: number;
  size: number;
  /** Base64 (standard) SHA-256 hashes, in RFC 6962 order. */
  hashes: string[];
}

/** A consistency proof (`chain(name).consistencyProof`): the tree of from events is a prefix of the tree of to. */
export interface ConsistencyProof {
  from: number;
  to: number;
  hashes: string[];
}

function decodeHashes(hashes: string[]): Uint8Array[] {
  return hashes.map((s, i) => {
    const h = fromBase64Std(s);
    if (!h || h.length !== 32) throw clientError('proof_invalid', `shardkeeper: proof hash ${i} is not a base64 SHA-256`);
    return h;
  });
}

/**
 * Checks offline that event is event `event.seq` of the tree of the checkpoint, signed by the
 * log key (its verifier key, as `shardkeeper chain log-key` printed it), by the inclusion
 * proof. Resolves with the checkpoint; fails with `invalid_log_key`, `checkpoint_invalid` or
 * `proof_invalid`.
 */
export async function verifyInclusion(args: {
  checkpoint: string | Uint8Array;
  logKey: string | LogKey;
  event: AttestedEvent;
  proof: InclusionProof;
}): Promise<Checkpoint> {
  const { event: e, proof: p } = args;
  const cp = await openCheckpoint(args.checkpoint, args.logKey);
  if (p.size !== cp.size || p.seq !== e.seq) {
    throw clientError(
      'proof_invalid',
      `shardkeeper: the proof is of event ${p.seq} in a tree of ${p.size} events; the event is ${e.seq}, the checkpoint's tree has ${cp.size}`,
    );
  }
  const hashes = decodeHashes(p.hashes);
  if (!(await verifyInclusionProof(await leafHash(attestationLeaf(e)), e.seq - 1, cp.size, hashes, cp.root))) {
    throw clientError('proof_invalid', `shardkeeper: event ${e.seq} is not in the checkpoint's tree of ${cp.size} events`);
  }
  return cp;
}

/**
 * Checks offline that the tree of checkpoint `older` is a prefix of the tree of checkpoint
 * `newer` (both signed by the log key), by the consistency proof: the log only grew between
 * them. Resolves with both checkpoints; fails with `invalid_log_key`, `checkpoint_invalid` or
 * `proof_invalid`.
 */
export async function verifyConsistency(args: {
  older: string | Uint8Array;
  newer: string | Uint8Array;
  logKey: string | LogKey;
  proof: ConsistencyProof;
}): Promise<{ older: Checkpoint; newer: Checkpoint }> {
  const key = typeof args.logKey === 'string' ? await parseLogKey(args.logKey) : args.logKey;
  const older = await openCheckpoint(args.older, key);
  const newer = await openCheckpoint(args.newer, key);
  const p = args.proof;
  if (p.from !== older.size || p.to !== newer.size) {
    throw clientError('proof_invalid', `shardkeeper: the proof is from ${p.from} to ${p.to} events; the checkpoints have ${older.size} and ${newer.size}`);
  }
  const hashes = decodeHashes(p.hashes);
  if (!(await verifyConsistencyProof(older.size, newer.size, hashes, older.root, newer.root))) {
    throw clientError('proof_invalid', `shardkeeper: the tree of ${older.size} events is not a prefix of the tree of ${newer.size}`);
  }
  return { older, newer };
}
