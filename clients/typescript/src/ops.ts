// The operational endpoints a client uses: health, readiness, the cluster's view and its
// routing table.

import type { CallOptions, Transport } from './http.js';
import { type Routes, ROUTES } from './routing.js';
import { decode, shape } from './wire.js';

/** One member of the cluster, as the answering node's gossip sees it. */
export interface Member {
  nodeId: string;
  /** Raft server id: node id @ incarnation of its data directory. */
  serverId: string;
  state: 'alive' | 'suspect' | 'failed' | 'left';
  /** When it entered its state (Unix ms). */
  stateSince: number;
  /** Set while it refuses writes for lack of disk space. */
  diskLow?: boolean;
  /** Set while it waits, told to stop, for others to take over its replicas. */
  leaving?: boolean;
  httpAddr: string;
}

/** One partition, with its Raft group's leader, replicas and progress. */
export interface Partition {
  id: number;
  group: number;
  /** Node id; "" while the group has no leader. */
  leader: string;
  replicas: string[];
  voters: string[];
  nonVoters: string[];
  appliedIndex: number;
  /** Node id → entries the replica trails the leader by; absent when unknown. */
  lag?: Record<string, number>;
  underReplicated: boolean;
}

/** GET /v1/cluster: the answering node's view. */
export interface ClusterStatus {
  nodeId: string;
  members: Member[];
  partitions: Partition[];
}

export const MEMBER = shape<Member>()({
  node_id: 'nodeId',
  server_id: 'serverId',
  state: 'state',
  state_since: 'stateSince',
  disk_low: 'diskLow',
  leaving: 'leaving',
  http_addr: 'httpAddr',
});
export const PARTITION = shape<Partition>()({
  id: 'id',
  group: 'group',
  leader: 'leader',
  replicas: 'replicas',
  voters: 'voters',
  non_voters: 'nonVoters',
  applied_index: 'appliedIndex',
  // Keyed by node id: copied as it is.
  lag: 'lag',
  under_replicated: 'underReplicated',
});
export const CLUSTER = shape<ClusterStatus>()({
  node_id: 'nodeId',
  members: { name: 'members', shape: MEMBER, list: true },
  partitions: { name: 'partitions', shape: PARTITION, list: true },
});

/** The operational calls of `Shardkeeper`. */
export class Ops {
  constructor(private readonly t: Transport) {}

  /** Resolves while the node answers GET /healthz with 200. */
  async healthz(opts?: CallOptions): Promise<void> {
    await this.t.call({ method: 'GET', path: '/healthz', idempotent: true }, opts);
  }

  /**
   * Resolves when the node answers GET /readyz with 200 (a member, every partition with a
   * leader); fails with its 503 otherwise. One attempt: a readiness probe reports, it does
   * not wait — see waitReady.
   */
  async readyz(opts?: CallOptions): Promise<void> {
    await this.t.call({ method: 'GET', path: '/readyz', single: true }, opts);
  }

  /** Polls readyz every intervalMs (default 100) until it succeeds or the call ends (timeoutMs, signal). */
  async waitReady(opts: CallOptions & { intervalMs?: number } = {}): Promise<void> {
    const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
    for (;;) {
      const left = deadline - Date.now();
      try {
        await this.readyz({ timeoutMs: Math.max(1, left), ...(opts.signal ? { signal: opts.signal } : {}) });
        return;
      } catch (err) {
        if (Date.now() >= deadline || opts.signal?.aborted) throw err;
      }
      await new Promise((r) => setTimeout(r, Math.min(opts.intervalMs ?? 100, Math.max(0, deadline - Date.now()))));
    }
  }

  /** The answering node's view of the cluster. */
  async cluster(opts?: CallOptions): Promise<ClusterStatus> {
    return decode<ClusterStatus>(CLUSTER, (await this.t.call({ method: 'GET', path: '/v1/cluster', idempotent: true }, opts)).data);
  }

  /** The routing table as one node knows it. */
  async routes(opts?: CallOptions): Promise<Routes> {
    return decode<Routes>(ROUTES, (await this.t.call({ method: 'GET', path: '/v1/cluster/routes', idempotent: true }, opts)).data);
  }
}
