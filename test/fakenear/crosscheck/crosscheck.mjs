// Checks a running fake NEAR node (test/fakenear) against near-api-js, used unmodified: its
// JsonRpcProvider must read every answer of the fake as it reads a real node's, its typed
// errors included.
//
//   node crosscheck.mjs [URL]      (or FAKENEAR_URL; default http://127.0.0.1:3030/)
//
// It creates its two accounts through the fake's admin side (POST /fake/accounts; an account
// that exists is fine), then: reads the node status, the access key and the final block;
// signs a transfer with a key from a fixed seed and sends it with wait_until FINAL; sends the
// same bytes again (the same transaction: the same outcome); and sends another transaction
// with the nonce already used, which must fail with near-api-js's InvalidNonceError. Every
// step prints a line; any mismatch exits 1.
import { createHash } from 'node:crypto';
import {
  actions,
  baseDecode,
  baseEncode,
  createTransaction,
  JsonRpcProvider,
  KeyPairEd25519,
  KeyPairSigner,
} from 'near-api-js';
import { InvalidNonceError, UnknownTransactionError } from 'near-api-js/rpc-errors';

const url = (process.argv[2] || process.env.FAKENEAR_URL || 'http://127.0.0.1:3030/').replace(/\/?$/, '/');

// The key of fakenear.KeyFromLabel("crosscheck"): seed sha256("fakenear key crosscheck").
const seed = createHash('sha256').update('fakenear key crosscheck').digest();
const keyPair = new KeyPairEd25519(baseEncode(seed));
const publicKey = keyPair.getPublicKey();
const signer = new KeyPairSigner(keyPair);
const sender = 'crosscheck.test';
const receiver = 'crosscheck-receiver.test';

let failures = 0;
function check(ok, what, detail = '') {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? ': ' + detail : ''}`);
  if (!ok) failures++;
}
const show = (v) => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x));

async function createAccount(account) {
  const res = await fetch(`${url}fake/accounts`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(account),
  });
  if (res.status !== 201 && res.status !== 409) {
    throw new Error(`POST /fake/accounts ${account.account_id}: HTTP ${res.status} ${await res.text()}`);
  }
}

async function signed(nonce, amount, blockHash) {
  const tx = createTransaction(sender, publicKey, receiver, nonce, [actions.transfer(amount)], baseDecode(blockHash));
  const { txHash, signedTransaction } = await signer.signTransaction(tx);
  return { hash: baseEncode(txHash), signedTransaction };
}

async function main() {
  console.log(`fake node ${url}, key ${publicKey.toString()}`);
  await createAccount({ account_id: sender, balance: '1000000000000000000000000', keys: [{ public_key: publicKey.toString() }] });
  await createAccount({ account_id: receiver, balance: '0' });

  const provider = new JsonRpcProvider({ url });
  const status = await provider.viewNodeStatus();
  check(typeof status.chain_id === 'string' && status.sync_info.latest_block_height > 0, 'status', `chain_id ${status.chain_id}, height ${status.sync_info.latest_block_height}`);

  const ak = await provider.viewAccessKey({ accountId: sender, publicKey, finalityQuery: { finality: 'final' } });
  check(typeof ak.nonce === 'bigint' && ak.permission === 'FullAccess', 'view_access_key', `nonce ${ak.nonce}, permission ${show(ak.permission)}`);

  const block = await provider.viewBlock({ finality: 'final' });
  check(typeof block.header.hash === 'string' && block.header.height > 0, 'block final', `height ${block.header.height} hash ${block.header.hash}`);

  const nonce = ak.nonce + 1n;
  const first = await signed(nonce, 10n, block.header.hash);
  const outcome = await provider.sendTransactionUntil(first.signedTransaction, 'FINAL');
  check(outcome.final_execution_status === 'FINAL', 'send_tx FINAL status', outcome.final_execution_status);
  check(outcome.status && outcome.status.SuccessValue === '', 'send_tx outcome', show(outcome.status));
  check(outcome.transaction.hash === first.hash && outcome.transaction_outcome.id === first.hash, 'send_tx hash is near-api-js\'s', first.hash);
  check(Array.isArray(outcome.receipts_outcome) && outcome.receipts_outcome.length > 0, 'send_tx receipts_outcome', `${outcome.receipts_outcome.length} receipt(s)`);

  const again = await provider.sendTransactionUntil(first.signedTransaction, 'FINAL');
  check(again.transaction.hash === first.hash && show(again.status) === show(outcome.status), 're-send of the same bytes answers the same outcome');

  const byHash = await provider.viewTransactionStatus({ txHash: first.hash, accountId: sender, waitUntil: 'NONE' });
  check(byHash.transaction.hash === first.hash, 'tx by hash', byHash.final_execution_status);

  const after = await provider.viewAccessKey({ accountId: sender, publicKey, finalityQuery: { finality: 'final' } });
  check(after.nonce === nonce, 'access key nonce after landing', `${after.nonce}`);

  try {
    const stale = await signed(nonce, 11n, block.header.hash);
    await provider.sendTransactionUntil(stale.signedTransaction, 'INCLUDED');
    check(false, 'stale nonce', 'no error');
  } catch (e) {
    console.log(`stale nonce error: class ${e.constructor.name}, message "${e.message}", transactionNonce ${e.transactionNonce}, accessKeyNonce ${e.accessKeyNonce}`);
    check(e instanceof InvalidNonceError, 'stale nonce is near-api-js InvalidNonceError', e.constructor.name);
    // near-api-js keeps these as the JSON numbers nearcore sends.
    check(BigInt(e.transactionNonce) === nonce && BigInt(e.accessKeyNonce) === nonce, 'InvalidNonceError fields', `tx ${e.transactionNonce} ak ${e.accessKeyNonce}`);
  }

  try {
    await provider.viewTransactionStatus({ txHash: baseEncode(new Uint8Array(32).fill(7)), accountId: sender, waitUntil: 'NONE' });
    check(false, 'unknown transaction', 'no error');
  } catch (e) {
    check(e instanceof UnknownTransactionError, 'unknown transaction is near-api-js UnknownTransactionError', e.constructor.name);
  }
}

try {
  await main();
} catch (e) {
  console.log(`FAIL unexpected error: ${e.constructor.name}: ${e.message}`);
  failures++;
}
console.log(failures === 0 ? 'crosscheck: all checks passed' : `crosscheck: ${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
