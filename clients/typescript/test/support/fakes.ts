// The repository's fake NEAR node (test/fakenear) and fake Arweave node (test/fakearweave),
// started as processes on free ports: what the relayer and the chain talk to in the tests.

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { goBinary, repoRoot } from './paths.js';
import { type Child, start, waitFor } from './process.js';

/** An account of the fake NEAR chain. */
export interface FakeAccount {
  account_id: string;
  /** yoctoNEAR, decimal. */
  balance: string;
  keys?: Array<{ public_key: string; nonce?: number }>;
}

/** A running fake NEAR node. */
export interface FakeNear {
  /** Its JSON-RPC URL (give it to shardkeeper as --near-rpc). */
  rpc: string;
  child: Child;
  stop(): Promise<void>;
}

/** An entry of the fake's ledger (GET /fake/ledger): a transaction it landed, refused, dropped or lost. */
export interface LedgerEntry {
  seq: number;
  kind: 'landed' | 'refused' | 'dropped' | 'lost';
  hash: string;
  signer_id: string;
  public_key: string;
  receiver_id: string;
  nonce: number;
  actions: unknown;
  /** The final execution status of a landed transaction. */
  status?: Record<string, unknown>;
  /** The status of each receipt (a delegate action's inner receipt may fail while status succeeds). */
  receipts?: unknown[];
  [k: string]: unknown;
}

/**
 * Starts the fake NEAR node with accounts (NEAR's nonce rules, a block every 100 ms, nearcore's
 * answers and errors). Its address is read from the file it writes once listening.
 */
export async function startFakeNear(dir: string, accounts: FakeAccount[]): Promise<FakeNear> {
  const bin = goBinary('fakenear', './test/fakenear/cmd/fakenear');
  const accountsFile = join(dir, 'near-accounts.json');
  const addrFile = join(dir, 'near-addr.json');
  await writeFile(accountsFile, JSON.stringify({ accounts }));
  const child = start('fakenear', bin, ['--listen', '127.0.0.1:0', '--accounts', accountsFile, '--addr-file', addrFile, '--log-level', 'warn'], {
    cwd: repoRoot(),
    logPath: join(dir, 'fakenear.log'),
  });
  let addrs: { endpoints: Array<{ url: string }> } | undefined;
  await waitFor('the fake NEAR node to listen', async () => {
    if (!child.alive) throw new Error(`fakenear exited (log: ${child.logPath})`);
    addrs = JSON.parse(await readFile(addrFile, 'utf8')) as typeof addrs;
    return true;
  });
  return { rpc: addrs!.endpoints[0]!.url.replace(/\/$/, ''), child, stop: () => child.stop() };
}

/** The transactions the fake NEAR node took so far. */
export async function nearLedger(rpc: string): Promise<LedgerEntry[]> {
  const res = await fetch(`${rpc}/fake/ledger`);
  if (!res.ok) throw new Error(`fake NEAR ledger: HTTP ${res.status}`);
  return ((await res.json()) as { entries: LedgerEntry[] }).entries;
}

/** A running fake Arweave node. */
export interface FakeArweave {
  /** Its URL (give it to shardkeeper as --arweave-gateway). */
  url: string;
  child: Child;
  stop(): Promise<void>;
}

/** Starts the fake Arweave node (it validates posts as a node does and mines a block every 100 ms). */
export async function startFakeArweave(dir: string): Promise<FakeArweave> {
  const bin = goBinary('fakearweave', './test/fakearweave/cmd/fakearweave');
  const child = start('fakearweave', bin, ['--addr', '127.0.0.1:0'], { cwd: repoRoot(), logPath: join(dir, 'fakearweave.log') });
  const line = await child.nextLine();
  const m = /listening on (\S+)/.exec(line);
  if (!m) throw new Error(`fakearweave: unexpected first line ${JSON.stringify(line)}`);
  return { url: `http://${m[1]}`, child, stop: () => child.stop() };
}
