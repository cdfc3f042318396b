// The device attestation registry against a real node, with real Ed25519 keys (Web Crypto):
// register, challenge, verify, key rotation with a proof or the admin token, delete.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Shardkeeper } from '../../src/client.js';
import type { Devices } from '../../src/devices.js';
import { toBase64Url } from '../../src/encoding.js';
import { isShardkeeperError } from '../../src/errors.js';
import { generateDeviceKey, signNonce } from '../../src/keys.js';
import { refusedWith } from '../support/assert.js';
import { type Stack, clientOptions, unique, useStack } from '../support/stack.js';

let stack: Stack;
let sk: Shardkeeper;
before(async () => {
  stack = await useStack();
  sk = new Shardkeeper(clientOptions(stack));
});
after(() => stack.stop());

const device = (deviceId: string, publicKey: CryptoKey | Uint8Array | string) => ({ deviceId, version: '1.4.2', platform: 'android', buildHash: '9f2c1e', publicKey });

/** A challenge for the device, signed with key, verified. */
async function attest(reg: Devices, deviceId: string, key: CryptoKey, requestId?: string) {
  const ch = await reg.challenge(deviceId);
  const signature = await signNonce(key, ch.nonce);
  return { ch, signature, result: await reg.verify({ deviceId, nonce: ch.nonce, signature, ...(requestId ? { requestId } : {}) }) };
}

describe('devices', () => {
  test('register, challenge, verify, read', async () => {
    const reg = sk.devices(unique('reg'));
    const keys = await generateDeviceKey();
    const r = await reg.register(device('phone-1', keys.publicKey));
    assert.equal(r.created, true);
    assert.equal(r.deviceId, 'phone-1');
    assert.equal(r.registeredAt, r.lastSeen);

    const again = await reg.register(device('phone-1', keys.publicKey));
    assert.equal(again.created, false, 'a re-registration');
    assert.equal(again.registeredAt, r.registeredAt);

    const { ch, result } = await attest(reg, 'phone-1', keys.privateKey);
    assert.ok(ch.expiresAt > Date.now() - 60_000);
    assert.deepEqual([result.verified, result.deviceId], [true, 'phone-1']);

    const d = await reg.get('phone-1');
    assert.deepEqual(
      { ...d, registeredAt: 0, lastSeen: 0 },
      { deviceId: 'phone-1', version: '1.4.2', platform: 'android', buildHash: '9f2c1e', registeredAt: 0, lastSeen: 0, pendingChallenges: 0 },
    );
    assert.equal(d.lastSeen, result.verifiedAt);
  });

  test('a challenge is good for one attempt: nonce_used (409), unless the attempt repeats its request id', async () => {
    const reg = sk.devices(unique('reg'));
    const keys = await generateDeviceKey();
    await reg.register(device('d', keys.publicKey));
    const { ch, signature, result } = await attest(reg, 'd', keys.privateKey, 'verify-1');
    assert.deepEqual(await reg.verify({ deviceId: 'd', nonce: ch.nonce, signature, requestId: 'verify-1' }), result);
    await assert.rejects(reg.verify({ deviceId: 'd', nonce: ch.nonce, signature }), refusedWith(409, 'nonce_used'));
  });

  test('a wrong signature: invalid_signature (401), and the nonce is used up', async () => {
    const reg = sk.devices(unique('reg'));
    const [keys, other] = [await generateDeviceKey(), await generateDeviceKey()];
    await reg.register(device('d', keys.publicKey));
    const ch = await reg.challenge('d');
    const signature = await signNonce(other.privateKey, ch.nonce);
    await assert.rejects(reg.verify({ deviceId: 'd', nonce: ch.nonce, signature }), refusedWith(401, 'invalid_signature'));
    await assert.rejects(reg.verify({ deviceId: 'd', nonce: ch.nonce, signature: await signNonce(keys.privateKey, ch.nonce) }), refusedWith(409, 'nonce_used'));
  });

  test('unknown devices and nonces', async () => {
    const reg = sk.devices(unique('reg'));
    await assert.rejects(reg.get('nobody'), refusedWith(404, 'unknown_device'));
    await assert.rejects(reg.challenge('nobody'), refusedWith(404, 'unknown_device'));
    const keys = await generateDeviceKey();
    await reg.register(device('d', keys.publicKey));
    await assert.rejects(reg.verify({ deviceId: 'd', nonce: 'never-issued', signature: new Uint8Array(64) }), refusedWith(404, 'unknown_nonce'));
  });

  test('the public key as a CryptoKey, raw bytes or base64url is the same key', async () => {
    const reg = sk.devices(unique('reg'));
    const keys = await generateDeviceKey();
    const raw = new Uint8Array(await crypto.subtle.exportKey('raw', keys.publicKey));
    assert.equal((await reg.register(device('d', keys.publicKey))).created, true);
    assert.equal((await reg.register(device('d', raw))).created, false);
    assert.equal((await reg.register(device('d', toBase64Url(raw)))).created, false);
    await assert.rejects(reg.register(device('d', raw.subarray(1))), refusedWith(0, 'invalid_argument'));
  });

  test('key rotation needs a proof by the current key', async () => {
    const reg = sk.devices(unique('reg'));
    const [current, next] = [await generateDeviceKey(), await generateDeviceKey()];
    await reg.register(device('d', current.publicKey));
    await assert.rejects(reg.register(device('d', next.publicKey)), refusedWith(409, 'device_exists'));

    const ch = await reg.challenge('d');
    const bad = await signNonce(next.privateKey, ch.nonce);
    await assert.rejects(reg.register({ ...device('d', next.publicKey), nonce: ch.nonce, signature: bad }), refusedWith(401, 'invalid_signature'));

    const ch2 = await reg.challenge('d');
    const proof = await signNonce(current.privateKey, ch2.nonce);
    const rotated = await reg.register({ ...device('d', next.publicKey), nonce: ch2.nonce, signature: proof });
    assert.equal(rotated.created, false);

    assert.equal((await attest(reg, 'd', next.privateKey)).result.verified, true, 'the new key verifies');
    await assert.rejects(attest(reg, 'd', current.privateKey), refusedWith(401, 'invalid_signature'));
  });

  test('the admin token replaces the proof, only when asked to', async () => {
    const reg = sk.devices(unique('reg'));
    const [lost, fresh] = [await generateDeviceKey(), await generateDeviceKey()];
    await reg.register(device('d', lost.publicKey));
    await assert.rejects(reg.register(device('d', fresh.publicKey)), refusedWith(409, 'device_exists'), 'the client holds the admin token but does not send it');
    assert.equal((await reg.register(device('d', fresh.publicKey), { useAdminToken: true })).created, false);
    assert.equal((await attest(reg, 'd', fresh.privateKey)).result.verified, true);
    const noAdmin = new Shardkeeper(clientOptions(stack, { adminToken: undefined })).devices(reg.registry);
    await assert.rejects(noAdmin.register(device('d', lost.publicKey), { useAdminToken: true }), (err: unknown) => {
      assert.ok(isShardkeeperError(err) && err.code === 'invalid_argument', String(err));
      return true;
    }, 'useAdminToken without an admin token is refused before anything is sent');
  });

  test('delete (admin), then the device is gone; without the admin token: unauthorized', async () => {
    const reg = sk.devices(unique('reg'));
    const keys = await generateDeviceKey();
    await reg.register(device('d', keys.publicKey));
    const noAdmin = new Shardkeeper(clientOptions(stack, { adminToken: 'wrong' }));
    await assert.rejects(noAdmin.devices(reg.registry).delete('d'), refusedWith(401, 'unauthorized'));
    await reg.delete('d');
    await assert.rejects(reg.get('d'), refusedWith(404, 'unknown_device'));
    assert.equal((await reg.register(device('d', keys.publicKey))).created, true, 'registers anew');
  });
});
