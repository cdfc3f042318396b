// Retries against a real node, through a proxy that injects faults and counts the requests the
// node received: answers lost after the node ran the request, connections dropped before it,
// 503s and 429s the node never saw. A request the contract does not make repeatable (issuing
// a nonce, a challenge) is never sent twice; a repeatable one is, and its repeat is answered as
// the first — by its request id, idempotency key or (entity, ver).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Shardkeeper } from '../../src/client.js';
import { isShardkeeperError } from '../../src/errors.js';
import { generateDeviceKey, signNonce } from '../../src/keys.js';
import { nearLedger } from '../support/fakes.js';
import { FaultProxy } from '../support/faultproxy.js';
import { freePort } from '../support/process.js';
import { type Stack, clientOptions, unique, useStack } from '../support/stack.js';

let stack: Stack;
let proxy: FaultProxy;
let sk: Shardkeeper;
before(async () => {
  stack = await useStack();
  proxy = await FaultProxy.start(stack.url);
  sk = new Shardkeeper(clientOptions(stack, { url: proxy.url, retries: { retries: 4, baseDelayMs: 10, maxDelayMs: 50 } }));
});
after(async () => {
  await proxy.close();
  await stack.stop();
});

const dropAnswer = { kind: 'drop-answer' } as const;
const networkError = (err: unknown) => isShardkeeperError(err, 'network_error') && err.status === 0;

describe('requests that must not run twice are sent once', () => {
  test('a nonce issue whose answer is lost fails; the node received it once', async () => {
    const org = unique('org');
    proxy.inject({ method: 'POST', path: '/v1/nonces' }, dropAnswer);
    await assert.rejects(sk.nonces.issue(org), networkError);
    assert.equal(proxy.received({ method: 'POST', path: /^\/v1\/nonces$/ }).filter((s) => s.body.includes(org)).length, 1);
  });

  test('a nonce issue whose connection dropped before the node fails too: the client cannot know', async () => {
    const org = unique('org');
    proxy.inject({ method: 'POST', path: '/v1/nonces' }, { kind: 'drop' });
    await assert.rejects(sk.nonces.issue(org), networkError);
    const mine = proxy.requests({ method: 'POST', path: /^\/v1\/nonces$/ }).filter((s) => s.body.includes(org));
    assert.equal(mine.length, 1, 'sent once');
    assert.equal(mine.filter((s) => s.forwarded).length, 0);
  });

  test('a challenge whose answer is lost fails; the node issued exactly one', async () => {
    const reg = sk.devices(unique('reg'));
    const keys = await generateDeviceKey();
    await reg.register({ deviceId: 'd', version: '1', platform: 'p', buildHash: 'b', publicKey: keys.publicKey });
    proxy.inject({ method: 'POST', path: `/v1/attest/${reg.registry}/challenge` }, dropAnswer);
    await assert.rejects(reg.challenge('d'), networkError);
    assert.equal(proxy.received({ path: `/v1/attest/${reg.registry}/challenge` }).length, 1);
    assert.equal((await reg.get('d')).pendingChallenges, 1, 'the lost challenge is pending, alone');
  });
});

describe('repeatable requests are retried and answered as the first', () => {
  test('a consume whose answer is lost: sent again with the same request id, 200 with the first used_at', async () => {
    const org = unique('org');
    const n = await sk.nonces.issue(org);
    proxy.inject({ path: `/v1/nonces/${n.nonce}/consume` }, dropAnswer);
    const c = await sk.nonces.consume(n.nonce, { orgId: org });
    const sent = proxy.received({ path: `/v1/nonces/${n.nonce}/consume` });
    assert.equal(sent.length, 2, 'the node ran it twice');
    const ids = sent.map((s) => (JSON.parse(s.body) as { request_id: string }).request_id);
    assert.equal(ids[0], ids[1]);
    assert.equal((await sk.nonces.get(n.nonce)).usedAt, c.usedAt, 'consumed once: by the first attempt');
  });

  test('a verify whose answer is lost', async () => {
    const reg = sk.devices(unique('reg'));
    const keys = await generateDeviceKey();
    await reg.register({ deviceId: 'd', version: '1', platform: 'p', buildHash: 'b', publicKey: keys.publicKey });
    const ch = await reg.challenge('d');
    proxy.inject({ path: `/v1/attest/${reg.registry}/verify` }, dropAnswer);
    const v = await reg.verify({ deviceId: 'd', nonce: ch.nonce, signature: await signNonce(keys.privateKey, ch.nonce) });
    assert.equal(v.verified, true);
    assert.equal(proxy.received({ path: `/v1/attest/${reg.registry}/verify` }).length, 2);
  });

  test('a relayer submit whose answer is lost: the repeat reaches the same intent, which lands once', async () => {
    const relayer = sk.relayer(stack.relayerAccount);
    const key = unique('pay');
    proxy.inject({ method: 'POST', path: `/v1/relayers/${stack.relayerAccount}/intents` }, dropAnswer, dropAnswer);
    const sub = await relayer.submit({ idempotencyKey: key, receiverId: stack.receiverAccount, actions: [{ Transfer: { deposit: '5' } }] });
    assert.equal(sub.created, false, 'the first attempt created it');
    assert.equal(proxy.received({ method: 'POST', path: `/v1/relayers/${stack.relayerAccount}/intents` }).filter((s) => s.body.includes(key)).length, 3);
    const done = await relayer.wait(key, { timeoutMs: 30_000 });
    assert.equal(done.status, 'succeeded');
    assert.equal(done.attempts, 1, 'one transaction signed');
    const ledger = await nearLedger(stack.nearRpc);
    assert.equal(ledger.filter((e) => e.kind === 'landed' && e.hash === done.txHash).length, 1, 'landed once');
  });

  test('a chain append and a heartbeat whose answers are lost', async () => {
    const chain = sk.chain(unique('main'));
    proxy.inject({ path: `/v1/chains/${chain.name}/events` }, dropAnswer);
    const a = await chain.append({ entityId: 'doc', ver: 1, op: 'create', vis: 'public', manifest: { n: 1 } });
    assert.equal(a.created, false);
    assert.equal(proxy.received({ path: `/v1/chains/${chain.name}/events` }).length, 2);

    const reg = sk.servers(unique('prod'));
    proxy.inject({ method: 'PUT', path: `/v1/servers/${reg.registry}/` }, dropAnswer);
    await reg.heartbeat('a', { address: 'x:1' });
    assert.equal(proxy.received({ method: 'PUT', path: `/v1/servers/${reg.registry}/` }).length, 2);
    assert.equal((await reg.list()).length, 1);
  });
});

describe('answers that say come back later', () => {
  test('503s the node never saw are retried, also for an issue: the node ran it once', async () => {
    const org = unique('org');
    proxy.inject({ method: 'POST', path: '/v1/nonces' }, { kind: 'status', status: 503 }, { kind: 'status', status: 429, code: 'too_many_outstanding' });
    const n = await sk.nonces.issue(org);
    assert.equal(n.orgId, org);
    const mine = proxy.requests({ method: 'POST', path: /^\/v1\/nonces$/ }).filter((s) => s.body.includes(org));
    assert.deepEqual(mine.map((s) => s.forwarded), [false, false, true]);
  });

  test('Retry-After is honoured', async () => {
    const org = unique('org');
    proxy.inject({ method: 'GET', path: '/v1/servers/' }, { kind: 'status', status: 503, retryAfter: 1 });
    const t0 = Date.now();
    await sk.servers(org).list();
    assert.ok(Date.now() - t0 >= 1000, `waited ${Date.now() - t0} ms`);
  });

  test('budget_exceeded is not retried', async () => {
    proxy.inject({ method: 'POST', path: `/v1/relayers/` }, { kind: 'status', status: 429, code: 'budget_exceeded', retryAfter: 3600 });
    const before = proxy.seen.length;
    await assert.rejects(
      sk.relayer(stack.relayerAccount).submit({ idempotencyKey: unique('x'), receiverId: stack.receiverAccount, actions: [{ Transfer: { deposit: '1' } }] }),
      (err) => isShardkeeperError(err, 'budget_exceeded') && err.status === 429 && err.retryAfterMs === 3_600_000,
    );
    assert.equal(proxy.seen.length - before, 1);
  });

  test('the retries run out: the last 503 is the error', async () => {
    const few = new Shardkeeper(clientOptions(stack, { url: proxy.url, retries: { retries: 2, baseDelayMs: 1 } }));
    const n = unique('reg');
    proxy.inject({ path: `/v1/servers/${n}` }, ...Array.from({ length: 5 }, () => ({ kind: 'status', status: 503 }) as const));
    await assert.rejects(few.servers(n).list(), (err) => isShardkeeperError(err, 'unavailable') && err.status === 503);
    assert.equal(proxy.requests({ path: `/v1/servers/${n}` }).length, 3);
    assert.equal(proxy.received({ path: `/v1/servers/${n}` }).length, 0);
  });
});

test('a node that refuses connections: the issue goes on to the next URL, sent once', async () => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  const org = unique('org');
  const two = new Shardkeeper(clientOptions(stack, { urls: [dead, proxy.url], routing: false, retries: { retries: 2, baseDelayMs: 1 } }));
  const n = await two.nonces.issue(org);
  assert.equal(n.orgId, org);
  assert.equal(proxy.received({ method: 'POST', path: /^\/v1\/nonces$/ }).filter((s) => s.body.includes(org)).length, 1);
});
