// The attestation chain against a real node anchoring on the fake Arweave node: append, head,
// events, entities, versions, and the transparency log — checkpoints signed by the node's log
// key, inclusion and consistency proofs checked offline, tampering caught.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Chain, ChainEvent } from '../../src/chain.js';
import { Shardkeeper } from '../../src/client.js';
import { openCheckpoint } from '../../src/note.js';
import { verifyConsistency, verifyInclusion } from '../../src/proofs.js';
import { waitFor } from '../support/process.js';
import { refusedWith } from '../support/assert.js';
import { type Stack, clientOptions, unique, useStack } from '../support/stack.js';

let stack: Stack;
let sk: Shardkeeper;
before(async () => {
  stack = await useStack();
  sk = new Shardkeeper(clientOptions(stack));
});
after(() => stack.stop());

/** A verifier key of another Ed25519 key with the same name, as `shardkeeper chain log-key` writes one. */
async function anotherLogKey(name: string): Promise<string> {
  const pair = (await crypto.subtle.generateKey('Ed25519', true, ['sign', 'verify'])) as CryptoKeyPair;
  const key = new Uint8Array([1, ...new Uint8Array(await crypto.subtle.exportKey('raw', pair.publicKey))]);
  const hash = createHash('sha256').update(`${name}\n`).update(key).digest().subarray(0, 4).toString('hex');
  return `${name}+${hash}+${Buffer.from(key).toString('base64')}`;
}

const manifest = (i: number) => ({ title: `report ${i}`, sha256: i.toString(16).padStart(64, '0') });

/** Appends versions 1..n of entities doc-1..doc-k and waits until the chain confirmed seq `upTo`. */
async function confirmed(chain: Chain, upTo: number): Promise<void> {
  await waitFor(`chain ${chain.name} to confirm ${upTo} events`, async () => (await chain.head()).confirmedSeq >= upTo, { timeoutMs: 30_000 });
}

describe('chain', () => {
  test('append, head, events, entities, versions', async () => {
    const chain = sk.chain(unique('main'));
    const empty = await chain.head();
    assert.deepEqual([empty.seq, empty.txId, empty.cid, empty.confirmedSeq], [0, null, null, 0], 'a chain never written reads as empty');

    const a = await chain.append({ entityId: 'doc-1', ver: 1, op: 'create', vis: 'public', manifest: manifest(1) });
    assert.equal(a.created, true);
    assert.deepEqual([a.chain, a.entityId, a.ver, a.status], [chain.name, 'doc-1', 1, 'queued']);
    assert.match(a.cid, /^bafkrei[a-z2-7]+$/);
    // The CID is of the canonical JSON: member order does not change it; a repeat is created false.
    const repeat = await chain.append({ entityId: 'doc-1', ver: 1, op: 'create', vis: 'public', manifest: { sha256: manifest(1).sha256, title: 'report 1' } });
    assert.deepEqual([repeat.created, repeat.cid, repeat.createdAt], [false, a.cid, a.createdAt]);
    await chain.append({ entityId: 'doc-1', ver: 2, op: 'update', vis: 'public', manifest: manifest(2), ts: 1795623911038 });
    await confirmed(chain, 2);

    const head = await chain.head();
    assert.equal(head.seq, 2);
    const e1 = await chain.event(1);
    const e2 = await chain.event(2);
    assert.deepEqual([e1.seq, e1.entityId, e1.ver, e1.cid, e1.op, e1.prevTx, e1.prevCid], [1, 'doc-1', 1, a.cid, 'create', null, null]);
    assert.deepEqual([e2.prevTx, e2.prevCid, e2.ts, e2.status], [e1.txId, e1.cid, 1795623911038, 'confirmed']);
    assert.equal(head.txId, e2.txId);

    const latest = await chain.entity('doc-1');
    assert.deepEqual(latest, { entityId: 'doc-1', ver: 2, cid: e2.cid, txId: e2.txId, seq: 2, ts: e2.ts });
    const v1 = await chain.version('doc-1', 1);
    assert.deepEqual(v1, { entityId: 'doc-1', ver: 1, cid: a.cid, status: 'confirmed', txId: e1.txId, seq: 1, ts: e1.ts, error: null });
  });

  test('refusals: conflict, a wrong cid, the chain’s own entity, unknown events, no token', async () => {
    const chain = sk.chain(unique('main'));
    await chain.append({ entityId: 'doc', ver: 1, op: 'create', vis: 'public', manifest: manifest(1) });
    await assert.rejects(chain.append({ entityId: 'doc', ver: 1, op: 'create', vis: 'public', manifest: manifest(2) }), refusedWith(409, 'event_conflict'));
    await assert.rejects(
      chain.append({ entityId: 'doc', ver: 2, op: 'create', vis: 'public', manifest: manifest(2), cid: 'bafkreieelmz4eejlh4m5niivb6ombpu5cesmghwhoij23jle7xmn2gckzm' }),
      refusedWith(400, 'cid_mismatch'),
    );
    await assert.rejects(chain.append({ entityId: 'shardkeeper.checkpoint', ver: 1, op: 'x', vis: 'public', manifest: {} }), refusedWith(400, 'invalid_id'));
    await assert.rejects(chain.event(999), refusedWith(404, 'unknown_event'));
    await assert.rejects(chain.entity('nothing'), refusedWith(404, 'unknown_entity'));
    await assert.rejects(chain.version('doc', 9), refusedWith(404, 'unknown_version'));
    const anon = new Shardkeeper({ url: stack.url });
    await assert.rejects(anon.chain(chain.name).append({ entityId: 'doc', ver: 3, op: 'x', vis: 'y', manifest: {} }), refusedWith(401, 'unauthorized'));
    await assert.rejects(chain.event(0), refusedWith(0, 'invalid_argument'));
    assert.equal(await chain.retry(), 0, 'no failed event to queue again (admin)');
  });

  test('the transparency log: checkpoints, inclusion and consistency proofs, checked offline', async () => {
    const chain = sk.chain(unique('log'));
    for (let i = 1; i <= 5; i++) await chain.append({ entityId: `doc-${i % 2}`, ver: i, op: 'create', vis: 'public', manifest: manifest(i) });
    await confirmed(chain, 5);
    const cp5 = await chain.checkpoint();
    const opened = await openCheckpoint(cp5, stack.logKey);
    assert.deepEqual([opened.origin, opened.size], [`log.test/${chain.name}`, 5]);

    // Every event is in the tree of the checkpoint, by proofs fetched and checked offline.
    const events: ChainEvent[] = [];
    for (let seq = 1; seq <= 5; seq++) {
      const event = await chain.event(seq);
      events.push(event);
      const proof = await chain.inclusionProof(seq, 5);
      assert.equal((await verifyInclusion({ checkpoint: cp5, logKey: stack.logKey, event, proof })).size, 5);
    }
    const proven = await chain.proveInclusion(3, { logKey: stack.logKey, checkpoint: cp5 });
    assert.deepEqual(proven.event, events[2]);

    // A tampered event, a proof of another event, or a checkpoint checked with another key fail.
    const proof3 = await chain.inclusionProof(3, 5);
    await assert.rejects(verifyInclusion({ checkpoint: cp5, logKey: stack.logKey, event: { ...events[2]!, ts: events[2]!.ts + 1 }, proof: proof3 }), refusedWith(0, 'proof_invalid'));
    await assert.rejects(verifyInclusion({ checkpoint: cp5, logKey: stack.logKey, event: events[3]!, proof: proof3 }), refusedWith(0, 'proof_invalid'));
    await assert.rejects(verifyInclusion({ checkpoint: cp5, logKey: await anotherLogKey('log.test'), event: events[2]!, proof: proof3 }), refusedWith(0, 'checkpoint_invalid'));
    const [name, , key] = stack.logKey.split('+');
    await assert.rejects(verifyInclusion({ checkpoint: cp5, logKey: `${name}+00000000+${key}`, event: events[2]!, proof: proof3 }), refusedWith(0, 'invalid_log_key'));
    await assert.rejects(
      verifyInclusion({ checkpoint: cp5.replace('\n5\n', '\n6\n'), logKey: stack.logKey, event: events[2]!, proof: proof3 }),
      refusedWith(0, 'checkpoint_invalid'),
    );

    // The log grows; the old checkpoint is a prefix of the new one.
    for (let i = 6; i <= 8; i++) await chain.append({ entityId: 'doc-2', ver: i, op: 'update', vis: 'public', manifest: manifest(i) });
    await confirmed(chain, 8);
    const grown = await chain.proveConsistency(cp5, { logKey: stack.logKey });
    assert.deepEqual([grown.older.size, grown.newer.size], [5, 8]);
    const cp8 = await chain.checkpoint();
    const proof = await chain.consistencyProof(5, 8);
    await verifyConsistency({ older: cp5, newer: cp8, logKey: stack.logKey, proof });
    await assert.rejects(verifyConsistency({ older: cp8, newer: cp5, logKey: stack.logKey, proof }), refusedWith(0, 'proof_invalid'));
    assert.equal((await chain.proveInclusion(8, { logKey: stack.logKey })).checkpoint.size, 8);
    await assert.rejects(chain.proveInclusion(9, { logKey: stack.logKey, checkpoint: cp8 }), refusedWith(0, 'invalid_argument'));
    await assert.rejects(chain.inclusionProof(9, 9), refusedWith(400, 'invalid_request'));
  });
});
