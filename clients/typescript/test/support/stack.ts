// Everything the tests (and the examples) run against: a fake NEAR node, a fake Arweave node
// and one shardkeeper node with every service on — the relayer over the fake NEAR node, the
// chain over the fake Arweave node with a log key, and the admin and servers tokens.
//
// The test runner starts one stack and hands its description to every test file in the
// SHARDKEEPER_TEST_STACK environment variable; a file run alone starts its own (useStack).

import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type FakeArweave, type FakeNear, startFakeArweave, startFakeNear } from './fakes.js';
import type { ShardkeeperOptions } from '../../src/client.js';
import { type NearKey, nearKey } from './nearkeys.js';
import { repoRoot, shardkeeperBinary } from './paths.js';
import { type Node, startShardkeeper } from './shardkeeper.js';

/** What a test needs to know of a running stack (all of it JSON, so that it crosses processes). */
export interface StackInfo {
  /** The node's HTTP API. */
  url: string;
  adminToken: string;
  relayerToken: string;
  chainToken: string;
  serversToken: string;
  /** The chains' log verifier key (`shardkeeper chain log-key` printed it). */
  logKey: string;
  /** The fake NEAR node's JSON-RPC URL; its ledger is at `${nearRpc}/fake/ledger`. */
  nearRpc: string;
  /** The fake Arweave node's URL. */
  arweaveUrl: string;
  /** The relayer account shardkeeper signs for, and an account it may pay. */
  relayerAccount: string;
  receiverAccount: string;
  /** A funded NEAR account whose key signs delegate actions in the tests. */
  user: { accountId: string; seedLabel: string; publicKey: string };
  /** The folder of the data, keys and logs. */
  dir: string;
}

/** A stack this process started or was handed; stop() ends only what this process started. */
export interface Stack extends StackInfo {
  /** Stops the processes and removes the folder (kept, logs and all, with keepFiles). */
  stop(opts?: { keepFiles?: boolean }): Promise<void>;
}

/** Seeds of the NEAR keys: the relayer's access key and the delegating user's. */
const RELAYER_KEY_LABEL = 'relayer';
const USER_KEY_LABEL = 'user';

/** The user's key pair (NEAR form and Web Crypto), from the stack's seed. */
export function userKey(info: StackInfo): Promise<NearKey> {
  return nearKey(info.user.seedLabel);
}

const token = (): string => randomBytes(32).toString('base64url');

async function secret(path: string, content: string): Promise<string> {
  await writeFile(path, content, { mode: 0o600 });
  return path;
}

/** Starts a fake NEAR node, a fake Arweave node and a shardkeeper node with every service on. */
export async function startStack(opts: { extraFlags?: string[] } = {}): Promise<Stack> {
  const bin = shardkeeperBinary(); // first: a missing binary fails before anything starts
  const dir = await mkdtemp(join(tmpdir(), 'shardkeeper-ts-'));
  const [relayerKey, user] = await Promise.all([nearKey(RELAYER_KEY_LABEL), nearKey(USER_KEY_LABEL)]);
  const info = {
    adminToken: token(),
    relayerToken: token(),
    chainToken: token(),
    serversToken: token(),
    relayerAccount: 'relayer.test',
    receiverAccount: 'alice.test',
    user: { accountId: 'user.test', seedLabel: USER_KEY_LABEL, publicKey: user.publicKey },
    dir,
  };
  const started: Array<{ stop(): Promise<void> }> = [];
  const stopAll = async (): Promise<void> => {
    for (const s of started.reverse()) await s.stop();
  };
  try {
    const [near, arweave] = await Promise.all([
      startFakeNear(dir, [
        { account_id: info.relayerAccount, balance: '1000000000000000000000000000', keys: [{ public_key: relayerKey.publicKey }] },
        { account_id: info.receiverAccount, balance: '0' },
        { account_id: info.user.accountId, balance: '1000000000000000000000000000', keys: [{ public_key: user.publicKey }] },
      ]).then((n: FakeNear) => (started.push(n), n)),
      startFakeArweave(dir).then((a: FakeArweave) => (started.push(a), a)),
    ]);

    const keys = await secret(
      join(dir, 'relayer-keys.json'),
      JSON.stringify({ accounts: [{ account_id: info.relayerAccount, keys: [relayerKey.secretKey] }] }),
    );
    // The Arweave test vectors' demo wallet (the fake holds no balances): owner-only, as the node demands.
    const wallet = await secret(join(dir, 'arweave-wallet.json'), await readFile(join(repoRoot(), 'arweave', 'testdata', 'wallet.json'), 'utf8'));
    const logKeyFile = join(dir, 'chain-log.key');
    const made = spawnSync(bin, ['chain', 'log-key', '--name', 'log.test', '--out', logKeyFile], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`shardkeeper chain log-key: ${made.stderr}`);
    const logKey = made.stdout.trim();

    const node: Node = await startShardkeeper({
      dir,
      flags: [
        '--admin-token-file', await secret(join(dir, 'admin-token'), info.adminToken),
        '--servers-token-file', await secret(join(dir, 'servers-token'), info.serversToken),
        '--relayer-keys', keys,
        '--relayer-token-file', await secret(join(dir, 'relayer-token'), info.relayerToken),
        '--near-rpc', near.rpc,
        '--arweave-gateway', arweave.url,
        '--arweave-wallet', wallet,
        '--chain-token-file', await secret(join(dir, 'chain-token'), info.chainToken),
        '--chain-log-key', logKeyFile,
        // The fake mines every 100 ms: poll often, so events confirm within a second.
        '--chain-poll-interval', '200ms',
        ...(opts.extraFlags ?? []),
      ],
    });
    started.push(node);
    return {
      ...info,
      url: node.url,
      logKey,
      nearRpc: near.rpc,
      arweaveUrl: arweave.url,
      async stop(o: { keepFiles?: boolean } = {}) {
        await stopAll();
        if (!o.keepFiles) await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** The environment variable that carries a running stack's StackInfo to test files. */
export const STACK_ENV = 'SHARDKEEPER_TEST_STACK';

/**
 * The stack of the test run (SHARDKEEPER_TEST_STACK), or a new one when this file runs alone;
 * stop() stops only a stack this call started.
 */
export async function useStack(): Promise<Stack> {
  const shared = process.env[STACK_ENV];
  if (shared) return { ...(JSON.parse(shared) as StackInfo), stop: async () => {} };
  return startStack();
}

/** Options of a client of the stack's node with every token (override any of them). */
export function clientOptions(info: StackInfo, overrides: Partial<ShardkeeperOptions> = {}): ShardkeeperOptions {
  return {
    url: info.url,
    adminToken: info.adminToken,
    relayerToken: info.relayerToken,
    chainToken: info.chainToken,
    serversToken: info.serversToken,
    ...overrides,
  };
}

/** A name no other test of the run uses: prefix and a random suffix in the identifier alphabet. */
export function unique(prefix: string): string {
  return `${prefix}-${randomBytes(6).toString('base64url').replace(/[^A-Za-z0-9]/g, 'x')}`;
}

/** The JSON that STACK_ENV carries. */
export function stackInfo(s: Stack): StackInfo {
  const { stop: _stop, ...info } = s;
  return info;
}
