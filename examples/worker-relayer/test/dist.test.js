// @ts-check
// The client's dist/, imported unmodified by a Worker in workerd: no Node built-in, only fetch
// and Web Crypto. The Worker issues and consumes a nonce, and submits a relayer intent and
// waits for it to land on the fake NEAR node.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { amount, useStack } from '../../testing/relay.js';
import { workerOnDist } from '../../testing/workerd.js';
import { nearLedger } from '../../../clients/typescript/build/test/support/index.js';

const script = `
import { Shardkeeper, ShardkeeperError } from './index.js';

export default {
  async fetch(request, env) {
    const { yocto } = await request.json();
    const sk = new Shardkeeper({ url: env.URL, relayerToken: env.RELAYER_TOKEN });
    const nonce = await sk.nonces.issue('org-workerd');
    const consumed = await sk.nonces.consume(nonce.nonce, { orgId: 'org-workerd' });
    let again;
    try {
      await sk.nonces.consume(nonce.nonce, { orgId: 'org-workerd' });
    } catch (err) {
      again = { isError: err instanceof ShardkeeperError, status: err.status, code: err.code };
    }
    const relayer = sk.relayer(env.RELAYER);
    const key = 'workerd-' + yocto;
    await relayer.submit({ idempotencyKey: key, receiverId: env.RECEIVER, actions: [{ Transfer: { deposit: yocto } }] });
    const intent = await relayer.wait(key, { timeoutMs: 20000 });
    return Response.json({ nonce, consumed, again, intent });
  },
};
`;

/** @type {Awaited<ReturnType<typeof useStack>>} */
let stack;
/** @type {import('miniflare').Miniflare} */
let mf;

before(async () => {
  stack = await useStack();
  mf = await workerOnDist(script, {
    URL: stack.url,
    RELAYER_TOKEN: stack.relayerToken,
    RELAYER: stack.relayerAccount,
    RECEIVER: stack.receiverAccount,
  });
});

after(async () => {
  await mf?.dispose();
  await stack?.stop();
});

test('dist/ in workerd: a nonce issued and consumed once, an intent landed', async () => {
  const yocto = String(amount());
  const res = await mf.dispatchFetch('http://worker/', { method: 'POST', body: JSON.stringify({ yocto }) });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const out = JSON.parse(text);
  assert.equal(out.consumed.nonce, out.nonce.nonce);
  assert.deepEqual(out.again, { isError: true, status: 409, code: 'nonce_used' });
  assert.equal(out.intent.status, 'succeeded', JSON.stringify(out.intent));
  const landed = (await nearLedger(stack.nearRpc)).filter((e) => e.kind === 'landed' && e.hash === out.intent.txHash);
  assert.equal(landed.length, 1);
  assert.ok(JSON.stringify(landed[0].actions).includes(yocto), JSON.stringify(landed[0].actions));
});
