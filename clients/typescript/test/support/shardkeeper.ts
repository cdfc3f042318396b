// A real shardkeeper node (the repository's binary), one member on loopback, started with the
// flags a test gives and awaited until /readyz answers 200.

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { repoRoot, shardkeeperBinary } from './paths.js';
import { type Child, freePort, start, waitFor } from './process.js';

/** A running node. */
export interface Node {
  /** Its HTTP API, "http://127.0.0.1:<port>". */
  url: string;
  child: Child;
  stop(): Promise<void>;
}

/** Options of startShardkeeper. */
export interface NodeOptions {
  /** A folder of its own: data and log go there. */
  dir: string;
  /** Flags of `shardkeeper serve` beyond the addresses and the data directory. */
  flags?: string[];
  nodeId?: string;
}

/**
 * Starts `shardkeeper serve` on free loopback ports (a few partitions and a short shutdown, to
 * spare the CPU) and waits until it is ready. A port another process took in the meantime
 * makes the node exit at once: it is then started again on other ports.
 */
export async function startShardkeeper(opts: NodeOptions): Promise<Node> {
  const bin = shardkeeperBinary();
  await mkdir(opts.dir, { recursive: true });
  for (let attempt = 1; ; attempt++) {
    const [http, gossip, raft, remote] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    const url = `http://127.0.0.1:${http}`;
    const args = [
      'serve',
      '--node-id', opts.nodeId ?? 'ts1',
      '--data-dir', join(opts.dir, 'data'),
      '--http-addr', `127.0.0.1:${http}`,
      '--gossip-addr', `127.0.0.1:${gossip}`,
      '--raft-addr', `127.0.0.1:${raft}`,
      '--remote-addr', `127.0.0.1:${remote}`,
      '--partitions', '8',
      '--shutdown-drain', '0s',
      '--leave-timeout', '0s',
      '--log-level', 'warn',
      ...(opts.flags ?? []),
    ];
    const child = start('shardkeeper', bin, args, { cwd: repoRoot(), logPath: join(opts.dir, `shardkeeper-${attempt}.log`) });
    try {
      await waitFor(`shardkeeper at ${url} to be ready`, async () => {
        if (!child.alive) throw new Error(`shardkeeper exited (log: ${child.logPath})`);
        const res = await fetch(`${url}/readyz`).catch(() => undefined);
        await res?.body?.cancel();
        return res?.status === 200;
      }, { timeoutMs: 60_000 });
      return { url, child, stop: () => child.stop() };
    } catch (err) {
      await child.stop();
      if (attempt >= 3) throw err;
    }
  }
}
