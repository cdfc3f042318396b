// Signed delegate actions encoded by the client's own borsh: byte for byte what near-api-js
// encodes, from NEAR's JSON form (near/testdata/vectors.json, made by near-api-js 7.3.1) and
// from near-api-js's own objects.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { KeyPair, KeyPairSigner, PublicKey, actions, buildDelegateAction, encodeDelegateAction as nearEncodeDelegateAction, encodeSignedDelegate as nearEncodeSignedDelegate } from 'near-api-js';
import {
  type DelegateAction,
  type DelegateActionItem,
  delegateHash,
  encodeDelegateAction,
  encodeSignedDelegate,
  signDelegate,
  signedDelegateBase64,
} from '../../src/delegate.js';
import { toBase58, toBase64, toHex } from '../../src/encoding.js';
import { isShardkeeperError } from '../../src/errors.js';
import { nearKey } from '../support/nearkeys.js';
import { repoRoot } from '../support/paths.js';

interface NearVector {
  name: string;
  sender_id: string;
  receiver_id: string;
  actions: DelegateActionItem[];
  nonce: string;
  max_block_height: string;
  public_key: string;
  nep461_message: string;
  hash: string;
  signature: string;
  signed: string;
}

const vectors = JSON.parse(readFileSync(join(repoRoot(), 'near', 'testdata', 'vectors.json'), 'utf8')) as { delegates: NearVector[] };

describe('signed delegates from NEAR’s JSON form match near-api-js', () => {
  for (const v of vectors.delegates) {
    test(v.name, async () => {
      const da: DelegateAction = {
        senderId: v.sender_id,
        receiverId: v.receiver_id,
        actions: v.actions,
        nonce: v.nonce,
        maxBlockHeight: v.max_block_height,
        publicKey: v.public_key,
      };
      assert.equal(toHex(encodeDelegateAction(da)), v.nep461_message.slice(8), 'the delegate action (after the 4-byte prefix)');
      assert.equal(toBase58(await delegateHash(da)), v.hash, 'the hash the sender signs');
      assert.equal(toBase64(encodeSignedDelegate({ delegateAction: da, signature: v.signature })), v.signed);
      assert.equal(signedDelegateBase64({ delegateAction: da, signature: v.signature }), v.signed);
    });
  }
});

describe('signed delegates from near-api-js objects', () => {
  test('every action kind the relayer decodes, encoded as near-api-js encodes it', async () => {
    const user = await nearKey('delegate test user');
    const other = PublicKey.fromString((await nearKey('delegate test other')).publicKey);
    const signer = new KeyPairSigner(KeyPair.fromString(user.secretKey as `ed25519:${string}`));
    const da = buildDelegateAction({
      senderId: 'alice.test',
      receiverId: 'app.test',
      actions: [
        actions.createAccount(),
        actions.deployContract(new Uint8Array([0, 97, 115, 109])),
        actions.functionCall('add_message', new Uint8Array(Buffer.from('{"text":"hi"}')), 30_000_000_000_000n, 1n),
        actions.transfer(10n ** 24n),
        actions.stake(32n * 10n ** 27n, other),
        actions.addFullAccessKey(other),
        actions.addFunctionCallAccessKey(other, 'app.test', ['add_message'], 250n * 10n ** 21n),
        actions.addFunctionCallAccessKey(other, 'app.test', [], undefined),
        actions.deleteKey(other),
        actions.deleteAccount('bob.test'),
      ],
      nonce: 9_007_199_254_740_993n, // past 2^53
      maxBlockHeight: 2n ** 64n - 1n,
      publicKey: PublicKey.fromString(user.publicKey),
    });
    assert.equal(toHex(encodeDelegateAction(da)), toHex(nearEncodeDelegateAction(da).subarray(4)));
    const { delegateHash: nearHash, signedDelegate } = await signer.signDelegateAction(da);
    assert.equal(toHex(await delegateHash(da)), toHex(nearHash));
    assert.equal(toHex(encodeSignedDelegate(signedDelegate)), toHex(nearEncodeSignedDelegate(signedDelegate)));
    assert.equal(signedDelegateBase64(signedDelegate), toBase64(nearEncodeSignedDelegate(signedDelegate)));
  });

  test('signDelegate (Web Crypto) signs what near-api-js signs', async () => {
    const user = await nearKey('delegate test user');
    const plain: DelegateAction = {
      senderId: 'alice.test',
      receiverId: 'app.test',
      actions: [{ Transfer: { deposit: '5' } }, { FunctionCall: { method_name: 'm', args: 'e30=', gas: 1000, deposit: '0' } }],
      nonce: 7n,
      maxBlockHeight: 1000,
      publicKey: user.publicKey,
    };
    const ours = await signDelegate(plain, user.privateKey);
    const signer = new KeyPairSigner(KeyPair.fromString(user.secretKey as `ed25519:${string}`));
    const nearDa = buildDelegateAction({
      senderId: 'alice.test',
      receiverId: 'app.test',
      actions: [actions.transfer(5n), actions.functionCall('m', new Uint8Array(Buffer.from('{}')), 1000n, 0n)],
      nonce: 7n,
      maxBlockHeight: 1000n,
      publicKey: PublicKey.fromString(user.publicKey),
    });
    const { signedDelegate } = await signer.signDelegateAction(nearDa);
    assert.equal(toHex(encodeSignedDelegate(ours)), toHex(nearEncodeSignedDelegate(signedDelegate)));
  });
});

describe('refused delegates', () => {
  const da: DelegateAction = {
    senderId: 'a.test',
    receiverId: 'b.test',
    actions: ['CreateAccount'],
    nonce: 1,
    maxBlockHeight: 1,
    publicKey: `ed25519:${toBase58(new Uint8Array(32).fill(1))}`,
  };
  const sig = `ed25519:${toBase58(new Uint8Array(64).fill(2))}`;
  const refused = (f: () => unknown, what: string): void =>
    assert.throws(f, (err) => isShardkeeperError(err, 'invalid_argument'), what);

  test('keys and signatures other than ed25519, and of the wrong length', () => {
    refused(() => encodeSignedDelegate({ delegateAction: { ...da, publicKey: 'secp256k1:abc' }, signature: sig }), 'a secp256k1 key');
    refused(() => encodeSignedDelegate({ delegateAction: { ...da, publicKey: new Uint8Array(31) }, signature: sig }), 'a short key');
    refused(() => encodeSignedDelegate({ delegateAction: da, signature: new Uint8Array(63) }), 'a short signature');
  });

  test('amounts that are not whole numbers or do not fit', () => {
    refused(() => encodeDelegateAction({ ...da, nonce: 1.5 }), 'a fraction');
    refused(() => encodeDelegateAction({ ...da, nonce: '-1' }), 'a negative');
    refused(() => encodeDelegateAction({ ...da, nonce: 2n ** 64n }), 'past u64');
    refused(() => encodeDelegateAction({ ...da, actions: [{ Transfer: { deposit: (2n ** 128n).toString() } }] }), 'past u128');
  });

  test('actions the relayer does not take, and a string that is not base64', () => {
    refused(() => encodeDelegateAction({ ...da, actions: [{ Delegate: {} } as unknown as DelegateActionItem] }), 'a nested delegate');
    refused(() => signedDelegateBase64('not base64!'), 'not base64');
  });
});
