// @ts-check
// The Worker relay end to end, in workerd: a delegate action signed by near-api-js, posted to
// the Worker, relayed by a real shardkeeper node to the fake NEAR node, where it lands exactly
// once, however many times the request is sent.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { amount, landedTransfers, signedTransfer, useStack } from '../../testing/relay.js';
import { bundledWorker } from '../../testing/workerd.js';

/** @type {Awaited<ReturnType<typeof useStack>>} */
let stack;
/** @type {import('miniflare').Miniflare} */
let mf;

before(async () => {
  stack = await useStack();
  mf = await bundledWorker(join(fileURLToPath(new URL('..', import.meta.url)), 'src', 'worker.js'), {
    SHARDKEEPER_URL: stack.url,
    SHARDKEEPER_RELAYER_TOKEN: stack.relayerToken,
    RELAYER_ACCOUNT_ID: stack.relayerAccount,
  });
});

after(async () => {
  await mf?.dispose();
  await stack?.stop();
});

/** @param {unknown} body */
const relay = async (body) => {
  const res = await mf.dispatchFetch('http://worker/relay', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: /** @type {any} */ (await res.json()) };
};

test('a signed delegate lands once, also when the request is sent twice', async () => {
  const yocto = amount();
  const signed = await signedTransfer(stack, yocto);
  const answers = await Promise.all([relay({ signed_delegate: signed }), relay({ signed_delegate: signed })]);
  answers.push(await relay({ signed_delegate: signed }));
  for (const a of answers) {
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal(a.body.status, 'succeeded', JSON.stringify(a.body));
    assert.equal(a.body.txHash, answers[0].body.txHash);
  }
  const landed = await landedTransfers(stack, yocto);
  assert.equal(landed.length, 1, `landed ${landed.length} times: ${JSON.stringify(landed)}`);
  assert.equal(landed[0].hash, answers[0].body.txHash);
});

test('a tampered delegate is refused with the node\'s code, and nothing lands', async () => {
  const yocto = amount();
  const signed = Buffer.from(await signedTransfer(stack, yocto), 'base64');
  signed[signed.length - 1] ^= 1;
  const a = await relay({ signed_delegate: signed.toString('base64') });
  assert.equal(a.status, 400);
  assert.equal(a.body.error, 'invalid_delegate');
  assert.equal((await landedTransfers(stack, yocto)).length, 0);
});
