// @ts-check
// The Express relay end to end: a delegate action signed by near-api-js, posted to the app,
// relayed by a real shardkeeper node to the fake NEAR node, where it lands exactly once,
// however many times the request is sent.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Shardkeeper } from '@shardkeeper/client';
import { relayApp } from '../app.js';
import { amount, landedTransfers, signedTransfer, useStack } from '../../testing/relay.js';

/** @type {Awaited<ReturnType<typeof useStack>>} */
let stack;
/** @type {import('node:http').Server} */
let server;
let base = '';

before(async () => {
  stack = await useStack();
  const sk = new Shardkeeper({ url: stack.url, relayerToken: stack.relayerToken });
  server = relayApp({ sk, accountId: stack.relayerAccount }).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const addr = server.address();
  base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
});

after(async () => {
  await new Promise((resolve) => server.close(resolve));
  await stack.stop();
});

/** @param {unknown} body */
const relay = (body) =>
  fetch(`${base}/relay`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

test('a signed delegate lands once, also when the request is sent twice', async () => {
  const yocto = amount();
  const signed = await signedTransfer(stack, yocto);
  // Twice at once, then once more after the outcome.
  const [a, b] = await Promise.all([relay({ signed_delegate: signed }), relay({ signed_delegate: signed })]);
  const c = await relay({ signed_delegate: signed });
  const records = [];
  for (const res of [a, b, c]) {
    assert.equal(res.status, 200, `POST /relay: HTTP ${res.status}`);
    records.push(await res.json());
  }
  for (const r of records) {
    assert.equal(r.status, 'succeeded', JSON.stringify(r));
    assert.equal(r.idempotencyKey, records[0].idempotencyKey);
    assert.equal(r.txHash, records[0].txHash);
  }
  assert.match(records[0].idempotencyKey, /^delegate:/);
  const landed = await landedTransfers(stack, yocto);
  assert.equal(landed.length, 1, `landed ${landed.length} times: ${JSON.stringify(landed)}`);
  assert.equal(landed[0].hash, records[0].txHash);
  assert.equal(landed[0].signer_id, stack.relayerAccount);
});

test('a tampered delegate is refused with the node\'s code, and nothing lands', async () => {
  const yocto = amount();
  const signed = Buffer.from(await signedTransfer(stack, yocto), 'base64');
  signed[signed.length - 1] ^= 1; // the signature's last byte
  const res = await relay({ signed_delegate: signed.toString('base64') });
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error, 'invalid_delegate');
  assert.equal((await landedTransfers(stack, yocto)).length, 0);
});

test('a body without signed_delegate is 400 invalid_request', async () => {
  const res = await relay({ delegate: 'x' });
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error, 'invalid_request');
});
