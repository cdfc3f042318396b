// The client: one object per cluster, holding the node URLs, the tokens, the retry policy and
// the routing state, and handing out one handle per domain.

import { Chain } from './chain.js';
import { Devices } from './devices.js';
import { clientError } from './errors.js';
import { type CallOptions, type FetchLike, Transport } from './http.js';
import { Nonces } from './nonces.js';
import { type ClusterStatus, Ops } from './ops.js';
import { Relayer } from './relayer.js';
import { type RetryPolicy, normalizeRetry } from './retry.js';
import type { Routes } from './routing.js';
import { Servers } from './servers.js';

/** How to reach a cluster. */
export interface ShardkeeperOptions {
  /** The URL of one node, or of a load balancer in front of the nodes ("http://127.0.0.1:8080"). */
  url?: string;
  /**
   * The URLs of several nodes: attempts go round robin over them, so a retry usually reaches
   * another node, and with `routing` each request goes to the leader of its partition.
   */
  urls?: string[];
  /** Sent on the relayer endpoints only (the server's --relayer-token or an account's own token). */
  relayerToken?: string;
  /** Sent on chain writes only (--chain-token). */
  chainToken?: string;
  /** Sent on the admin calls only (deletes, chain retry, and a device registration with useAdminToken). */
  adminToken?: string;
  /** Sent on server heartbeats only (--servers-token-file). */
  serversToken?: string;
  /**
   * The fetch to use (default: the global one). In Cloudflare Workers, pass a bound function if
   * it is a method of another object (`fetch: env.SERVICE.fetch.bind(env.SERVICE)`).
   */
  fetch?: FetchLike;
  /** The deadline of each call, retries included, in ms (default 30000; 0: none). A call past it fails with code `timeout`. */
  timeoutMs?: number;
  /** Retries after the first attempt (default 4), or the whole policy. See the README's Retries. */
  retries?: number | Partial<RetryPolicy>;
  /**
   * Send each request for one actor to the node that leads its partition, after the cluster's
   * routing table (GET /v1/cluster/routes). Default off, as in the Go client: the nodes forward.
   * Turn it on only when the client reaches every node at the address it advertises (a Worker
   * or a browser usually cannot reach a cluster's private addresses).
   */
  routing?: boolean;
}

/** A client of one shardkeeper cluster. Safe to share: calls do not interfere. */
export class Shardkeeper {
  /** The oracle's nonces. */
  readonly nonces: Nonces;
  private readonly t: Transport;
  private readonly ops: Ops;

  constructor(options: ShardkeeperOptions) {
    const urls = options.urls ?? (options.url !== undefined ? [options.url] : []);
    if (urls.length === 0) throw clientError('invalid_argument', 'shardkeeper: give url or urls');
    const bases = urls.map((u) => {
      let parsed: URL;
      try {
        parsed = new URL(u);
      } catch {
        throw clientError('invalid_argument', `shardkeeper: ${JSON.stringify(u)} is not an absolute http(s) URL`);
      }
      if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || !parsed.host) {
        throw clientError('invalid_argument', `shardkeeper: ${JSON.stringify(u)} is not an absolute http(s) URL`);
      }
      return u.replace(/\/+$/, '');
    });
    const tokens = {
      ...(options.adminToken ? { admin: options.adminToken } : {}),
      ...(options.relayerToken ? { relayer: options.relayerToken } : {}),
      ...(options.chainToken ? { chain: options.chainToken } : {}),
      ...(options.serversToken ? { servers: options.serversToken } : {}),
    };
    const fetchImpl: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.t = new Transport({
      bases,
      tokens,
      fetch: fetchImpl,
      timeoutMs: options.timeoutMs ?? 30_000,
      retry: normalizeRetry(options.retries),
      routing: options.routing ?? false,
    });
    this.nonces = new Nonces(this.t);
    this.ops = new Ops(this.t);
  }

  /** A device attestation registry. */
  devices(registry: string): Devices {
    return new Devices(this.t, registry);
  }

  /** A server registry. */
  servers(registry: string): Servers {
    return new Servers(this.t, registry);
  }

  /** A relayer account (NEAR account id, as in the server's keys file). */
  relayer(accountId: string): Relayer {
    return new Relayer(this.t, accountId);
  }

  /** An attestation chain. */
  chain(name: string): Chain {
    return new Chain(this.t, name);
  }

  /** Resolves while the node answers /healthz. */
  healthz(opts?: CallOptions): Promise<void> {
    return this.ops.healthz(opts);
  }

  /** Resolves when the node is ready (/readyz 200); one attempt. */
  readyz(opts?: CallOptions): Promise<void> {
    return this.ops.readyz(opts);
  }

  /** Polls readyz until the node is ready or timeoutMs (default 30000) passes. */
  waitReady(opts?: CallOptions & { intervalMs?: number }): Promise<void> {
    return this.ops.waitReady(opts);
  }

  /** The answering node's view of the cluster (GET /v1/cluster). */
  cluster(opts?: CallOptions): Promise<ClusterStatus> {
    return this.ops.cluster(opts);
  }

  /** The routing table as one node knows it (GET /v1/cluster/routes). */
  routes(opts?: CallOptions): Promise<Routes> {
    return this.ops.routes(opts);
  }

  /** Fetches the routing table now and routes by it (with routing on); otherwise just reads it. */
  refreshRoutes(opts?: CallOptions): Promise<Routes> {
    return this.t.refreshRoutes(opts);
  }
}
