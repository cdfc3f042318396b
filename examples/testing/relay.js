// @ts-check
// What the examples' tests share: a running stack (shardkeeper with the fake NEAR node behind
// it, from the client package's test support), a delegate action signed by near-api-js as a
// wallet signs it, and the fake NEAR ledger's word on what landed.

import { JsonRpcProvider, KeyPair, KeyPairSigner, actions, buildDelegateAction, encodeSignedDelegate } from 'near-api-js';
import { nearKey, nearLedger, useStack } from '../../clients/typescript/build/test/support/index.js';

export { useStack };

/**
 * A transfer of `yocto` from the stack's user to its receiver, as a delegate action the user's
 * wallet signs with near-api-js: base64 of the borsh SignedDelegateAction, as POST /relay takes it.
 *
 * @param {import('../../clients/typescript/build/test/support/index.js').StackInfo} stack
 * @param {bigint} yocto
 */
export async function signedTransfer(stack, yocto) {
  const key = await nearKey(stack.user.seedLabel);
  const keyPair = KeyPair.fromString(/** @type {any} */ (key.secretKey));
  const provider = new JsonRpcProvider({ url: stack.nearRpc });
  const publicKey = keyPair.getPublicKey();
  const ak = await provider.viewAccessKey({ accountId: stack.user.accountId, publicKey, finalityQuery: { finality: 'optimistic' } });
  const block = await provider.viewBlock({ finality: 'final' });
  const delegate = buildDelegateAction({
    senderId: stack.user.accountId,
    receiverId: stack.receiverAccount,
    actions: [actions.transfer(yocto)],
    nonce: BigInt(ak.nonce) + 1n,
    maxBlockHeight: BigInt(block.header.height) + 100n,
    publicKey,
  });
  const { signedDelegate } = await new KeyPairSigner(keyPair).signDelegateAction(delegate);
  return Buffer.from(encodeSignedDelegate(signedDelegate)).toString('base64');
}

/**
 * The transactions of the fake NEAR ledger that landed a delegate action of the stack's user
 * with `yocto` attached (each test relays a distinct amount).
 *
 * @param {import('../../clients/typescript/build/test/support/index.js').StackInfo} stack
 * @param {bigint} yocto
 */
export async function landedTransfers(stack, yocto) {
  const entries = await nearLedger(stack.nearRpc);
  return entries.filter((e) => e.kind === 'landed' && e.receiver_id === stack.user.accountId && JSON.stringify(e.actions).includes(`"${yocto}"`));
}

/** A distinct amount per relay, so that a test finds its own transfer in the ledger. */
export function amount() {
  return 1_000_000n + BigInt(Math.floor(Math.random() * 1e9));
}
