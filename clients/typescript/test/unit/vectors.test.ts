// The golden vectors Go computes (tlog/vectors_test.go writes them; `go test ./tlog` checks
// they are still what Go computes): the client must agree on every leaf, root and proof, and
// on the verdict of `shardkeeper chain proof` for every valid and tampered input.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CHAIN_EVENT, type ChainEvent } from '../../src/chain.js';
import { fromBase64Std, toBase64 } from '../../src/encoding.js';
import { type ShardkeeperError, isShardkeeperError } from '../../src/errors.js';
import { openCheckpoint, parseLogKey } from '../../src/note.js';
import {
  attestationLeaf,
  leafHash,
  verifyConsistency,
  verifyConsistencyProof,
  verifyInclusion,
  verifyInclusionProof,
} from '../../src/proofs.js';
import { decode } from '../../src/wire.js';
import { packageRoot } from '../support/paths.js';

const load = <T>(name: string): T => JSON.parse(readFileSync(join(packageRoot(), 'test', 'vectors', name), 'utf8')) as T;

interface ProofFile {
  log_key: string;
  origin: string;
  events: unknown[];
  leaves: Array<{ seq: number; canonical: string; hash: string }>;
  checkpoints: Record<string, string>;
  inclusion: Array<{ name: string; log_key: string; checkpoint: string; event: unknown; proof: { seq: number; size: number; hashes: string[] }; ok: boolean; error?: string }>;
  consistency: Array<{ name: string; log_key: string; older: string; newer: string; proof: { from: number; to: number; hashes: string[] }; ok: boolean; error?: string }>;
}

interface TreeFile {
  leaves: string[];
  leaf_hashes: string[];
  roots: string[];
  inclusion: Array<{ index: number; size: number; hashes: string[] }>;
  consistency: Array<{ from: number; to: number; hashes: string[] }>;
}

const proofs = load<ProofFile>('proofs.json');
const trees = load<TreeFile>('trees.json');
const b = (s: string): Uint8Array => fromBase64Std(s)!;
const flip = (h: Uint8Array): Uint8Array => {
  const c = h.slice();
  c[0]! ^= 1;
  return c;
};

/** The client's error code for Go's reason: which check refused the input. */
function expectedCode(goError: string): string {
  if (goError.startsWith('log key:')) return 'invalid_log_key';
  if (goError.startsWith('checkpoint') || goError === 'not a checkpoint') return 'checkpoint_invalid';
  return 'proof_invalid';
}

describe('RFC 6962 hashing agrees with Go', () => {
  test('leaves and roots', async () => {
    for (let i = 0; i < trees.leaves.length; i++) {
      assert.equal(toBase64(await leafHash(b(trees.leaves[i]!))), trees.leaf_hashes[i], `leaf ${i}`);
    }
  });

  test('every inclusion proof verifies, and none with a wrong leaf, index, root or path', async () => {
    for (const v of trees.inclusion) {
      const leaf = b(trees.leaf_hashes[v.index]!);
      const root = b(trees.roots[v.size - 1]!);
      const proof = v.hashes.map(b);
      const at = `leaf ${v.index} of ${v.size}`;
      assert.equal(await verifyInclusionProof(leaf, v.index, v.size, proof, root), true, at);
      assert.equal(await verifyInclusionProof(flip(leaf), v.index, v.size, proof, root), false, `${at}: another leaf`);
      assert.equal(await verifyInclusionProof(leaf, v.index, v.size, proof, flip(root)), false, `${at}: another root`);
      if (v.size > 1) {
        assert.equal(await verifyInclusionProof(leaf, (v.index + 1) % v.size, v.size, proof, root), false, `${at}: another index`);
        assert.equal(await verifyInclusionProof(leaf, v.index, v.size, [...proof.slice(1)], root), false, `${at}: a hash fewer`);
        assert.equal(await verifyInclusionProof(leaf, v.index, v.size, [...proof, proof[0]!], root), false, `${at}: a hash more`);
      }
      assert.equal(await verifyInclusionProof(leaf, v.size, v.size, proof, root), false, `${at}: an index past the tree`);
    }
  });

  test('every consistency proof verifies, and none with a wrong root or hash', async () => {
    for (const v of trees.consistency) {
      const from = b(trees.roots[v.from - 1]!);
      const to = b(trees.roots[v.to - 1]!);
      const proof = v.hashes.map(b);
      const at = `${v.from} → ${v.to}`;
      assert.equal(await verifyConsistencyProof(v.from, v.to, proof, from, to), true, at);
      assert.equal(await verifyConsistencyProof(v.from, v.to, proof, flip(from), to), false, `${at}: another old root`);
      assert.equal(await verifyConsistencyProof(v.from, v.to, proof, from, flip(to)), false, `${at}: another new root`);
      if (proof.length > 0) {
        assert.equal(await verifyConsistencyProof(v.from, v.to, [flip(proof[0]!), ...proof.slice(1)], from, to), false, `${at}: a hash flipped`);
      }
      assert.equal(await verifyConsistencyProof(v.to, v.from, proof, to, from), v.from === v.to, `${at}: reversed`);
    }
  });
});

describe('checkpoints and proofs agree with `shardkeeper chain proof`', () => {
  test('the leaves are the attestations’ canonical JSON', async () => {
    for (const l of proofs.leaves) {
      const e = decode<ChainEvent>(CHAIN_EVENT, proofs.events[l.seq - 1]);
      assert.equal(new TextDecoder().decode(attestationLeaf(e)), l.canonical, `event ${l.seq}`);
      assert.equal(toBase64(await leafHash(attestationLeaf(e))), l.hash, `event ${l.seq}`);
    }
  });

  test('the checkpoints open with the log key', async () => {
    const key = await parseLogKey(proofs.log_key);
    for (const [size, note] of Object.entries(proofs.checkpoints)) {
      const cp = await openCheckpoint(note, key);
      assert.equal(cp.size, Number(size));
      assert.equal(cp.origin, proofs.origin);
    }
  });

  for (const v of proofs.inclusion) {
    test(`inclusion: ${v.name}`, async () => {
      const check = verifyInclusion({ checkpoint: v.checkpoint, logKey: v.log_key, event: decode<ChainEvent>(CHAIN_EVENT, v.event), proof: v.proof });
      if (v.ok) {
        const cp = await check;
        assert.equal(cp.size, v.proof.size);
      } else {
        await assert.rejects(check, (err: ShardkeeperError) => {
          assert.ok(isShardkeeperError(err), String(err));
          assert.equal(err.code, expectedCode(v.error!), `Go: ${v.error}; client: ${err.message}`);
          assert.equal(err.status, 0);
          return true;
        });
      }
    });
  }

  for (const v of proofs.consistency) {
    test(`consistency: ${v.name}`, async () => {
      const check = verifyConsistency({ older: v.older, newer: v.newer, logKey: v.log_key, proof: v.proof });
      if (v.ok) {
        const { older, newer } = await check;
        assert.deepEqual([older.size, newer.size], [v.proof.from, v.proof.to]);
      } else {
        await assert.rejects(check, (err: ShardkeeperError) => {
          assert.ok(isShardkeeperError(err), String(err));
          assert.equal(err.code, expectedCode(v.error!), `Go: ${v.error}; client: ${err.message}`);
          return true;
        });
      }
    });
  }

  test('a checkpoint given as bytes opens as the text does, and invalid UTF-8 is refused', async () => {
    const note = proofs.checkpoints['7']!;
    const bytes = new TextEncoder().encode(note);
    assert.equal((await openCheckpoint(bytes, proofs.log_key)).size, 7);
    const broken = new Uint8Array([...bytes.subarray(0, 3), 0xff, ...bytes.subarray(3)]);
    await assert.rejects(openCheckpoint(broken, proofs.log_key), (err: ShardkeeperError) => err.code === 'checkpoint_invalid');
  });
});
