// Writes ../vectors.json (or the path given as its argument): transactions and delegate actions built, encoded, hashed and signed
// by near-api-js, for the Go tests to compare their own bytes with (see README.md).
//
// Every input is fixed (keys from fixed seeds, nonces, block hashes), and ed25519 signatures
// are deterministic, so running this twice writes the same file.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  actions,
  baseDecode,
  baseEncode,
  createTransaction,
  DelegateAction,
  encodeDelegateAction,
  encodeSignedDelegate,
  encodeTransaction,
  KeyPairEd25519,
  KeyPairSigner,
  PublicKey,
} from 'near-api-js';

const here = dirname(fileURLToPath(import.meta.url));
const nearApiJsVersion = JSON.parse(
  readFileSync(join(here, 'node_modules', 'near-api-js', 'package.json'), 'utf8'),
).version;

const sha256 = (s) => createHash('sha256').update(s).digest();
const hex = (b) => Buffer.from(b).toString('hex');
const b64 = (b) => Buffer.from(b).toString('base64');

// A key pair from a fixed seed, in NEAR's secret key form: base58 of seed || public key.
function fixedKey(label) {
  const seed = sha256(`shardkeeper near test key ${label}`);
  const pub = new KeyPairEd25519(baseEncode(seed)).getPublicKey();
  const secret = `ed25519:${baseEncode(new Uint8Array([...seed, ...pub.data]))}`;
  return { secret_key: secret, public_key: pub.toString() };
}

const keys = {
  relayer: fixedKey('relayer'),
  user: fixedKey('user'),
  added: fixedKey('added'),
};

const blockHash = (label) => baseEncode(sha256(`shardkeeper near test block ${label}`));

// Actions are written in NEAR's JSON form (as `tx` results show them, and as the relayer
// API accepts them) and turned into near-api-js actions here, so each vector states its
// inputs exactly once.
function toNearJs(spec) {
  if (spec === 'CreateAccount') return actions.createAccount();
  const [kind, body] = Object.entries(spec)[0];
  switch (kind) {
    case 'Transfer':
      return actions.transfer(BigInt(body.deposit));
    case 'FunctionCall':
      return actions.functionCall(
        body.method_name,
        new Uint8Array(Buffer.from(body.args, 'base64')),
        BigInt(body.gas),
        BigInt(body.deposit),
      );
    case 'AddKey': {
      const pk = PublicKey.fromString(body.public_key);
      const p = body.access_key.permission;
      const action =
        p === 'FullAccess'
          ? actions.addFullAccessKey(pk)
          : actions.addFunctionCallAccessKey(
              pk,
              p.FunctionCall.receiver_id,
              p.FunctionCall.method_names,
              p.FunctionCall.allowance === null ? undefined : BigInt(p.FunctionCall.allowance),
            );
      action.addKey.accessKey.nonce = BigInt(body.access_key.nonce); // near-api-js starts keys at 0
      return action;
    }
    case 'DeleteKey':
      return actions.deleteKey(PublicKey.fromString(body.public_key));
    case 'DeployContract':
      return actions.deployContract(new Uint8Array(Buffer.from(body.code, 'base64')));
    case 'Stake':
      return actions.stake(BigInt(body.stake), PublicKey.fromString(body.public_key));
    case 'DeleteAccount':
      return actions.deleteAccount(body.beneficiary_id);
  }
  throw new Error(`no near-api-js form for action ${kind}`);
}

const jsonArgs = (v) => b64(Buffer.from(JSON.stringify(v)));
const U128_MAX = ((1n << 128n) - 1n).toString();
const U64_MAX = ((1n << 64n) - 1n).toString();
const TGAS = 1_000_000_000_000;

const delegateSpecs = [
  {
    name: 'delegate_ft_transfer',
    signer: 'user',
    sender_id: 'alice.testnet',
    receiver_id: 'token.testnet',
    actions: [
      {
        FunctionCall: {
          method_name: 'ft_transfer',
          args: jsonArgs({ receiver_id: 'bob.testnet', amount: '1000' }),
          gas: 30 * TGAS,
          deposit: '1',
        },
      },
      { Transfer: { deposit: '5000000000000000000000' } },
    ],
    nonce: '153000000000123',
    max_block_height: '190000123',
  },
  {
    // The kinds a relayer decodes from a client but never builds itself.
    name: 'delegate_other_kinds',
    signer: 'user',
    sender_id: 'alice.testnet',
    receiver_id: 'alice.testnet',
    actions: [
      { DeployContract: { code: b64(Buffer.from('\0asm\x01\0\0\0', 'binary')) } },
      { Stake: { stake: '32000000000000000000000000000', public_key: keys.added.public_key } },
      { DeleteAccount: { beneficiary_id: 'bob.testnet' } },
    ],
    nonce: '1',
    max_block_height: U64_MAX,
  },
];

const txSpecs = [
  {
    name: 'create_account',
    signer_id: 'relayer.testnet',
    receiver_id: 'new.relayer.testnet',
    nonce: '1',
    block: 'a',
    actions: ['CreateAccount'],
  },
  {
    name: 'transfer_u128_max',
    signer_id: 'relayer.testnet',
    receiver_id: 'bob.testnet',
    nonce: '9007199254740993', // above 2^53: a u64 JavaScript numbers cannot hold
    block: 'b',
    actions: [{ Transfer: { deposit: U128_MAX } }],
  },
  {
    name: 'transfer_one_yocto',
    signer_id: 'relayer.testnet',
    receiver_id: 'bob.testnet',
    nonce: U64_MAX,
    block: 'c',
    actions: [{ Transfer: { deposit: '1' } }],
  },
  {
    name: 'function_call',
    signer_id: 'relayer.testnet',
    receiver_id: 'app.testnet',
    nonce: '153000000000001',
    block: 'd',
    actions: [
      {
        FunctionCall: {
          method_name: 'set_greeting',
          args: jsonArgs({ greeting: 'héllo, wörld ✓' }),
          gas: 300 * TGAS,
          deposit: '0',
        },
      },
    ],
  },
  {
    name: 'function_call_empty_args',
    signer_id: 'relayer.testnet',
    receiver_id: 'app.testnet',
    nonce: '2',
    block: 'e',
    actions: [{ FunctionCall: { method_name: 'ping', args: '', gas: 5 * TGAS, deposit: '1000000000000000000000000' } }],
  },
  {
    name: 'add_key_full_access',
    signer_id: 'relayer.testnet',
    receiver_id: 'relayer.testnet',
    nonce: '3',
    block: 'f',
    actions: [{ AddKey: { public_key: keys.added.public_key, access_key: { nonce: 0, permission: 'FullAccess' } } }],
  },
  {
    name: 'add_key_function_call_allowance',
    signer_id: 'relayer.testnet',
    receiver_id: 'relayer.testnet',
    nonce: '4',
    block: 'g',
    actions: [
      {
        AddKey: {
          public_key: keys.added.public_key,
          access_key: {
            nonce: 7,
            permission: {
              FunctionCall: {
                allowance: '250000000000000000000000',
                receiver_id: 'app.testnet',
                method_names: ['set_greeting', 'ping'],
              },
            },
          },
        },
      },
    ],
  },
  {
    name: 'add_key_function_call_unlimited',
    signer_id: 'relayer.testnet',
    receiver_id: 'relayer.testnet',
    nonce: '5',
    block: 'h',
    actions: [
      {
        AddKey: {
          public_key: keys.added.public_key,
          access_key: {
            nonce: 0,
            permission: { FunctionCall: { allowance: null, receiver_id: 'app.testnet', method_names: [] } },
          },
        },
      },
    ],
  },
  {
    name: 'delete_key',
    signer_id: 'relayer.testnet',
    receiver_id: 'relayer.testnet',
    nonce: '6',
    block: 'i',
    actions: [{ DeleteKey: { public_key: keys.added.public_key } }],
  },
  {
    name: 'multi_create_fund_key_call',
    signer_id: 'relayer.testnet',
    receiver_id: 'carol.relayer.testnet',
    nonce: '153000000000777',
    block: 'j',
    actions: [
      'CreateAccount',
      { Transfer: { deposit: '100000000000000000000000' } },
      { AddKey: { public_key: keys.user.public_key, access_key: { nonce: 0, permission: 'FullAccess' } } },
      {
        FunctionCall: {
          method_name: 'init',
          args: jsonArgs({ owner_id: 'carol.relayer.testnet' }),
          gas: 100 * TGAS,
          deposit: '0',
        },
      },
    ],
  },
  {
    name: 'meta_transaction',
    signer_id: 'relayer.testnet',
    receiver_id: 'alice.testnet', // a meta transaction goes to the delegate's sender
    nonce: '153000000000888',
    block: 'k',
    actions: [],
    signed_delegate: 'delegate_ft_transfer',
  },
];

async function main() {
  const delegates = [];
  const signedDelegates = {};
  for (const spec of delegateSpecs) {
    const key = keys[spec.signer];
    const da = new DelegateAction({
      senderId: spec.sender_id,
      receiverId: spec.receiver_id,
      actions: spec.actions.map(toNearJs),
      nonce: BigInt(spec.nonce),
      maxBlockHeight: BigInt(spec.max_block_height),
      publicKey: PublicKey.fromString(key.public_key),
    });
    const signer = KeyPairSigner.fromSecretKey(key.secret_key);
    const { delegateHash, signedDelegate } = await signer.signDelegateAction(da);
    signedDelegates[spec.name] = signedDelegate;
    delegates.push({
      ...spec,
      public_key: key.public_key,
      nep461_message: hex(encodeDelegateAction(da)),
      hash: baseEncode(delegateHash),
      signature: `ed25519:${baseEncode(signedDelegate.signature.data)}`,
      signed: b64(encodeSignedDelegate(signedDelegate)),
    });
  }

  const transactions = [];
  for (const spec of txSpecs) {
    const key = keys.relayer;
    const acts = spec.actions.map(toNearJs);
    if (spec.signed_delegate) acts.push(actions.signedDelegate(signedDelegates[spec.signed_delegate]));
    const tx = createTransaction(
      spec.signer_id,
      PublicKey.fromString(key.public_key),
      spec.receiver_id,
      BigInt(spec.nonce),
      acts,
      baseDecode(blockHash(spec.block)),
    );
    const signer = KeyPairSigner.fromSecretKey(key.secret_key);
    const { txHash, signedTransaction } = await signer.signTransaction(tx);
    const { block, ...inputs } = spec;
    transactions.push({
      ...inputs,
      signer: 'relayer',
      public_key: key.public_key,
      block_hash: blockHash(block),
      borsh: hex(encodeTransaction(tx)),
      hash: baseEncode(txHash),
      signature: `ed25519:${baseEncode(signedTransaction.signature.data)}`,
      signed: b64(signedTransaction.encode()),
    });
  }

  const out = {
    generator: `near-api-js ${nearApiJsVersion}, near/testdata/gen/gen.mjs`,
    keys,
    delegates,
    transactions,
  };
  const target = process.argv[2] ?? join(here, '..', 'vectors.json');
  writeFileSync(target, JSON.stringify(out, null, 2) + '\n');
}

await main();
