// The relayer against a real node relaying to the fake NEAR node: intents submitted, waited
// for with long polls, and found landed in the fake's ledger — actions, and users' signed
// delegate actions given as near-api-js objects, plain objects or bytes.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { KeyPair, KeyPairSigner, PublicKey, actions, buildDelegateAction } from 'near-api-js';
import { Shardkeeper } from '../../src/client.js';
import { type DelegateAction, encodeSignedDelegate, signDelegate } from '../../src/delegate.js';
import { isShardkeeperError } from '../../src/errors.js';
import { type Intent, type Relayer, isTerminal } from '../../src/relayer.js';
import { nearLedger } from '../support/fakes.js';
import type { NearKey } from '../support/nearkeys.js';
import { refusedWith } from '../support/assert.js';
import { type Stack, clientOptions, unique, useStack, userKey } from '../support/stack.js';

let stack: Stack;
let sk: Shardkeeper;
let relayer: Relayer;
let user: NearKey;
before(async () => {
  stack = await useStack();
  sk = new Shardkeeper(clientOptions(stack));
  relayer = sk.relayer(stack.relayerAccount);
  user = await userKey(stack);
});
after(() => stack.stop());

/** The landed ledger entry of an intent's transaction. */
async function landed(intent: Intent) {
  const entries = (await nearLedger(stack.nearRpc)).filter((e) => e.hash === intent.txHash);
  assert.equal(entries.filter((e) => e.kind === 'landed').length, 1, `transaction ${intent.txHash} landed once`);
  return entries.find((e) => e.kind === 'landed')!;
}

/** The user's access key nonce and the chain's height, from the fake NEAR node's RPC. */
async function nearState(): Promise<{ nonce: number; height: number }> {
  const res = await fetch(stack.nearRpc, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'query',
      params: { request_type: 'view_access_key', finality: 'final', account_id: stack.user.accountId, public_key: user.publicKey },
    }),
  });
  const body = (await res.json()) as { result: { nonce: number; block_height: number } };
  return { nonce: body.result.nonce, height: body.result.block_height };
}

// Delegate actions of the user take the key's nonces one after another: one at a time.
let delegateChain: Promise<unknown> = Promise.resolve();
function serially<T>(f: () => Promise<T>): Promise<T> {
  const next = delegateChain.then(f, f);
  delegateChain = next.catch(() => {});
  return next;
}

describe('relayer', () => {
  test('a transfer lands once: submit, wait, and the fake NEAR ledger shows it', async () => {
    const key = unique('pay');
    const req = { idempotencyKey: key, receiverId: stack.receiverAccount, actions: [{ Transfer: { deposit: '1000' } }] } as const;
    const sub = await relayer.submit({ ...req, actions: [...req.actions] });
    assert.equal(sub.created, true);
    assert.deepEqual([sub.idempotencyKey, sub.accountId, sub.status], [key, stack.relayerAccount, 'queued']);
    assert.match(sub.publicKey, /^ed25519:/);

    const done = await relayer.wait(key, { timeoutMs: 30_000 });
    assert.equal(done.status, 'succeeded');
    assert.ok(isTerminal(done));
    assert.deepEqual(done.outcome, { SuccessValue: '' });
    assert.equal(done.error, null);
    assert.equal(done.attempts, 1);
    assert.equal(typeof done.nonce, 'number');
    const entry = await landed(done);
    assert.deepEqual([entry.signer_id, entry.receiver_id, entry.nonce], [stack.relayerAccount, stack.receiverAccount, done.nonce]);

    const repeat = await relayer.submit({ ...req, actions: [...req.actions] });
    assert.equal(repeat.created, false, 'the same body again reaches the same intent');
    assert.equal(repeat.txHash, done.txHash);
    assert.deepEqual(await relayer.get(key), done);
    await landed(done);
  });

  test('the same key with another body: idempotency_conflict (409)', async () => {
    const key = unique('pay');
    await relayer.submit({ idempotencyKey: key, receiverId: stack.receiverAccount, actions: [{ Transfer: { deposit: '1' } }] });
    await assert.rejects(
      relayer.submit({ idempotencyKey: key, receiverId: stack.receiverAccount, actions: [{ Transfer: { deposit: '2' } }] }),
      refusedWith(409, 'idempotency_conflict'),
    );
  });

  test('wait returns the record as it is when its time is up, and an abort ends it', async () => {
    const key = unique('pay');
    await relayer.submit({ idempotencyKey: key, receiverId: stack.receiverAccount, actions: [{ Transfer: { deposit: '3' } }] });
    const quick = await relayer.wait(key, { timeoutMs: 1 });
    assert.equal(quick.idempotencyKey, key);
    const ctl = new AbortController();
    const waiting = relayer.wait(key, { timeoutMs: 30_000, signal: ctl.signal });
    ctl.abort();
    await assert.rejects(waiting, refusedWith(0, 'aborted'));
    assert.equal((await relayer.wait(key, { timeoutMs: 30_000 })).status, 'succeeded');
  });

  test('the account’s keys and policy', async () => {
    const s = await relayer.status();
    assert.equal(s.accountId, stack.relayerAccount);
    assert.equal(s.keys.length, 1);
    assert.match(s.keys[0]!.publicKey, /^ed25519:/);
    assert.deepEqual(s.policy, { receivers: null, actions: null, methods: null, maxDeposit: null, depositBudget: null });
    assert.equal(s.budgetUsed, undefined);
  });

  test('refusals: unknown intent, unknown account, no token, an unsupported action', async () => {
    await assert.rejects(relayer.get(unique('never')), refusedWith(404, 'unknown_intent'));
    await assert.rejects(sk.relayer('nobody.test').status(), refusedWith(404, 'unknown_relayer'));
    const anon = new Shardkeeper({ url: stack.url });
    await assert.rejects(anon.relayer(stack.relayerAccount).status(), refusedWith(401, 'unauthorized'));
    await assert.rejects(
      relayer.submit({ idempotencyKey: unique('x'), receiverId: stack.receiverAccount, actions: [{ DeleteAccount: { beneficiary_id: 'a.test' } } as never] }),
      refusedWith(400, 'unsupported_action'),
    );
  });

  test('a delegate signed with near-api-js lands, its key derived from the delegate', async () => {
    const done = await serially(async () => {
      const { nonce, height } = await nearState();
      const signer = new KeyPairSigner(KeyPair.fromString(user.secretKey as `ed25519:${string}`));
      const da = buildDelegateAction({
        senderId: stack.user.accountId,
        receiverId: stack.receiverAccount,
        actions: [actions.transfer(7n)],
        nonce: BigInt(nonce + 1),
        maxBlockHeight: BigInt(height + 10_000),
        publicKey: PublicKey.fromString(user.publicKey),
      });
      const { signedDelegate } = await signer.signDelegateAction(da);
      const sub = await relayer.submitDelegate(signedDelegate);
      assert.equal(sub.created, true);
      assert.match(sub.idempotencyKey, /^delegate:/);
      assert.equal((await relayer.submitDelegate(signedDelegate)).created, false, 'the same delegate is the same intent');
      return relayer.wait(sub.idempotencyKey, { timeoutMs: 30_000 });
    });
    assert.equal(done.status, 'succeeded');
    const entry = await landed(done);
    assert.deepEqual([entry.signer_id, entry.receiver_id], [stack.relayerAccount, stack.user.accountId], 'the relayer pays, to the delegate’s sender');
  });

  test('a delegate signed with Web Crypto, given as a plain object and as bytes', async () => {
    for (const form of ['object', 'bytes'] as const) {
      const done = await serially(async () => {
        const { nonce, height } = await nearState();
        const da: DelegateAction = {
          senderId: stack.user.accountId,
          receiverId: stack.receiverAccount,
          actions: [{ Transfer: { deposit: '11' } }],
          nonce: nonce + 1,
          maxBlockHeight: height + 10_000,
          publicKey: user.publicKey,
        };
        const signed = await signDelegate(da, user.privateKey);
        const key = unique(`delegate-${form}`);
        const sub = await relayer.submitDelegate(form === 'object' ? signed : encodeSignedDelegate(signed), { idempotencyKey: key });
        assert.equal(sub.idempotencyKey, key);
        return relayer.wait(key, { timeoutMs: 30_000 });
      });
      assert.equal(done.status, 'succeeded', form);
      await landed(done);
    }
  });

  test('a delegate whose signature does not verify: invalid_delegate (400)', async () => {
    const { nonce, height } = await nearState();
    const signed = await signDelegate(
      { senderId: stack.user.accountId, receiverId: stack.receiverAccount, actions: [{ Transfer: { deposit: '1' } }], nonce: nonce + 1, maxBlockHeight: height + 10_000, publicKey: user.publicKey },
      user.privateKey,
    );
    const bytes = encodeSignedDelegate(signed);
    bytes[bytes.length - 1]! ^= 1;
    await assert.rejects(relayer.submitDelegate(bytes), refusedWith(400, 'invalid_delegate'));
  });
});

test('wait refuses a timeout that is not a finite number of ms, before any request', async () => {
  for (const timeoutMs of [Number.NaN, Number.POSITIVE_INFINITY, -1]) {
    await assert.rejects(relayer.wait('any-key', { timeoutMs }), (err: unknown) => {
      assert.ok(isShardkeeperError(err) && err.code === 'invalid_argument', String(err));
      return true;
    });
  }
});
