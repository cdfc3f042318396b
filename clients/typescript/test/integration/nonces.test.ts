// The nonce oracle against a real node: issue, consume at most once, read, and every refusal
// as a typed error with the contract's code.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Shardkeeper } from '../../src/client.js';
import { type ShardkeeperError, isShardkeeperError } from '../../src/errors.js';
import { type Stack, clientOptions, unique, useStack } from '../support/stack.js';

let stack: Stack;
let sk: Shardkeeper;
before(async () => {
  stack = await useStack();
  sk = new Shardkeeper(clientOptions(stack));
});
after(() => stack.stop());

/** Asserts that p fails with a ShardkeeperError of this status and code. */
async function refused(p: Promise<unknown>, status: number, code: string): Promise<ShardkeeperError> {
  let caught: ShardkeeperError | undefined;
  await assert.rejects(p, (err) => {
    assert.ok(isShardkeeperError(err), `not a ShardkeeperError: ${String(err)}`);
    assert.equal(err.code, code, err.message);
    assert.equal(err.status, status);
    assert.ok(err.message.length > 0);
    caught = err;
    return true;
  });
  return caught!;
}

describe('nonces', () => {
  test('issue, read, consume once, read again', async () => {
    const org = unique('org');
    const n = await sk.nonces.issue(org);
    assert.match(n.nonce, /^[A-Za-z0-9_-]{1,128}$/);
    assert.equal(n.orgId, org);
    assert.ok(n.expiresAt > n.issuedAt);
    assert.equal(n.usedAt, null);

    assert.equal((await sk.nonces.get(n.nonce)).usedAt, null);
    const c = await sk.nonces.consume(n.nonce, { orgId: org });
    assert.equal(c.nonce, n.nonce);
    assert.ok(c.usedAt >= n.issuedAt);
    const read = await sk.nonces.get(n.nonce);
    assert.deepEqual(read, { ...n, usedAt: c.usedAt });
  });

  test('a used nonce is refused: nonce_used (409)', async () => {
    const org = unique('org');
    const n = await sk.nonces.issue(org);
    await sk.nonces.consume(n.nonce, { orgId: org });
    const err = await refused(sk.nonces.consume(n.nonce, { orgId: org }), 409, 'nonce_used');
    assert.equal(err.retryAfterMs, 0);
  });

  test('a consume repeated with its request id gets the first answer again', async () => {
    const org = unique('org');
    const n = await sk.nonces.issue(org);
    const first = await sk.nonces.consume(n.nonce, { orgId: org, requestId: 'req-1' });
    assert.deepEqual(await sk.nonces.consume(n.nonce, { orgId: org, requestId: 'req-1' }), first);
    await refused(sk.nonces.consume(n.nonce, { orgId: org, requestId: 'req-2' }), 409, 'nonce_used');
  });

  test('another organisation’s nonce: org_mismatch (403), and it stays unused', async () => {
    const n = await sk.nonces.issue(unique('org'));
    await refused(sk.nonces.consume(n.nonce, { orgId: unique('other') }), 403, 'org_mismatch');
    assert.equal((await sk.nonces.get(n.nonce)).usedAt, null);
  });

  test('a nonce never issued: unknown_nonce (404)', async () => {
    await refused(sk.nonces.get('zz_never-issued'), 404, 'unknown_nonce');
    await refused(sk.nonces.consume('zz_never-issued', { orgId: 'acme' }), 404, 'unknown_nonce');
  });

  test('a malformed organisation: invalid_id (400)', async () => {
    await refused(sk.nonces.issue('not an id!'), 400, 'invalid_id');
  });

  test('an empty nonce is refused before anything is sent: invalid_argument', async () => {
    await refused(sk.nonces.consume('', { orgId: 'acme' }), 0, 'invalid_argument');
  });
});
