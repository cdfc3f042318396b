// The server registry against a real node that requires the servers token: register,
// heartbeat, list, delete.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Shardkeeper } from '../../src/client.js';
import { refusedWith } from '../support/assert.js';
import { type Stack, clientOptions, unique, useStack } from '../support/stack.js';

let stack: Stack;
let sk: Shardkeeper;
before(async () => {
  stack = await useStack();
  sk = new Shardkeeper(clientOptions(stack));
});
after(() => stack.stop());

describe('servers', () => {
  test('register, heartbeat, list', async () => {
    const reg = sk.servers(unique('prod'));
    assert.deepEqual(await reg.list(), [], 'a registry never written is empty');
    const first = await reg.heartbeat('api-2', { address: '10.0.0.6:443', region: 'eu-west', meta: { version: '2.3.0' } });
    assert.equal(first.created, true);
    assert.equal(first.serverId, 'api-2');
    const beat = await reg.heartbeat('api-2', { address: '10.0.0.6:443', region: 'eu-west', meta: { version: '2.3.1' } });
    assert.equal(beat.created, false);
    assert.equal(beat.registeredAt, first.registeredAt);
    await reg.heartbeat('api-1', { address: '10.0.0.5:443' });

    const list = await reg.list();
    assert.deepEqual(list.map((s) => s.serverId), ['api-1', 'api-2'], 'in server id order');
    assert.deepEqual(list[0], { serverId: 'api-1', address: '10.0.0.5:443', region: '', meta: {}, registeredAt: list[0]!.registeredAt, lastSeen: list[0]!.lastSeen });
    assert.deepEqual(list[1]!.meta, { version: '2.3.1' });
    assert.equal(list[1]!.lastSeen, beat.lastSeen);
  });

  test('a heartbeat replaces region and meta', async () => {
    const reg = sk.servers(unique('prod'));
    await reg.heartbeat('a', { address: 'x:1', region: 'r', meta: { k: 1 } });
    await reg.heartbeat('a', { address: 'x:2' });
    const [s] = await reg.list();
    assert.deepEqual([s!.address, s!.region, s!.meta], ['x:2', '', {}]);
  });

  test('without the servers token: unauthorized (401), nothing written', async () => {
    const name = unique('prod');
    const anon = new Shardkeeper({ url: stack.url });
    await assert.rejects(anon.servers(name).heartbeat('a', { address: 'x:1' }), refusedWith(401, 'unauthorized'));
    assert.deepEqual(await anon.servers(name).list(), [], 'the list needs no token');
  });

  test('refusals: a malformed id, an empty address', async () => {
    const reg = sk.servers(unique('prod'));
    await assert.rejects(reg.heartbeat('not an id', { address: 'x:1' }), refusedWith(400, 'invalid_id'));
    await assert.rejects(reg.heartbeat('a', { address: '' }), refusedWith(400, 'invalid_request'));
  });

  test('delete (admin)', async () => {
    const reg = sk.servers(unique('prod'));
    await reg.heartbeat('a', { address: 'x:1' });
    await reg.delete('a');
    assert.deepEqual(await reg.list(), []);
    await assert.rejects(reg.delete('a'), refusedWith(404, 'unknown_server'));
  });
});
