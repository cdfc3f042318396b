// Routing over several nodes, as the Go client does it (client/routing.go, client/nonces.go).
//
// The cluster's routing table (GET /v1/cluster/routes) names, for each Raft group, its
// partitions and the HTTP address of its leader. An actor (kind, id) lives in partition
// FNV-1a-64(kind ‖ 0x00 ‖ id) mod P, so the client can send a request for one actor straight
// to its leader and save the forward any other node would make. The table may be stale at any
// time: the node that receives a request still routes it by Raft's word, so a stale entry costs
// a forward, never a wrong answer. Such an answer names the leader (Shardkeeper-Leader, with
// its partition in Shardkeeper-Partition), which the client takes at once, and it refreshes the
// whole table in the background, at most once a second.
//
// Apart from the table, a consume goes first to the node that issued its nonce: a node issues
// from an oracle shard it leads, so that node consumes without forwarding.

import { utf8 } from './encoding.js';
import { shape } from './wire.js';

/** The actor kinds the client routes, as the server names them. */
export const ActorKind = {
  devices: 'device-registry',
  servers: 'server-registry',
  nonces: 'nonce-oracle',
  chain: 'chain',
} as const;

/** The actor a call runs on. */
export interface Actor {
  kind: string;
  id: string;
}

/**
 * The oracle shard that issued nonce — its first two characters, before '_' — or undefined
 * when the nonce has not that shape (the server then answers without an actor).
 */
export function nonceActor(nonce: string): Actor | undefined {
  if (nonce.length < 3 || nonce[2] !== '_') return undefined;
  return { kind: ActorKind.nonces, id: nonce.slice(0, 2) };
}

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK64 = 0xffffffffffffffffn;

/** The server's partition of actor a among n partitions (actors.PartitionOf). */
export function partitionOf(a: Actor, n: number): number {
  let h = FNV_OFFSET;
  const step = (b: number): void => {
    h = ((h ^ BigInt(b)) * FNV_PRIME) & MASK64;
  };
  for (const b of utf8(a.kind)) step(b);
  step(0);
  for (const b of utf8(a.id)) step(b);
  return Number(h % BigInt(n));
}

/** The routing table as GET /v1/cluster/routes serves it. */
export interface Routes {
  /** Grows with every split and merge of partitions into Raft groups the answering node knows of. */
  epoch: number;
  /** P, the number of partitions. */
  partitions: number;
  groups: Route[];
}

/** One Raft group: its partitions [first, end) and its leader ("" while none is known). */
export interface Route {
  group: number;
  first: number;
  end: number;
  /** The leader's Raft term; 0 while no leader is known. */
  term: number;
  /** The leader's node id. */
  leader: string;
  /** host:port of the leader's HTTP API. */
  leaderHttp: string;
}

/** The wire shape of a route. */
export const ROUTE = shape<Route>()({
  group: 'group',
  first: 'first',
  end: 'end',
  term: 'term',
  leader: 'leader',
  leader_http: 'leaderHttp',
});

/** The wire shape of the routing table. */
export const ROUTES = shape<Routes>()({
  epoch: 'epoch',
  partitions: 'partitions',
  groups: { name: 'groups', shape: ROUTE, list: true },
});

/** What an answer says of a forward: the node that ran the request, and its partition. */
export interface Forwarded {
  /** host:port of the node that ran the request; "" when the answer was not forwarded. */
  addr: string;
  /** The partition that node leads, -1 when the answer does not say. */
  partition: number;
}

export const LEADER_HEADER = 'Shardkeeper-Leader';
export const PARTITION_HEADER = 'Shardkeeper-Partition';

/** Reads the forward headers of an answer. */
export function forwardedOf(h: Headers): Forwarded {
  const p = h.get(PARTITION_HEADER);
  return {
    addr: h.get(LEADER_HEADER) ?? '',
    partition: p !== null && /^\d+$/.test(p) && Number(p) < 2 ** 32 ? Number(p) : -1,
  };
}

/** The client's copy of the routing table. */
export class RoutingTable {
  private partitions = 0;
  private groups: Route[] = []; // sorted by first
  private bases: string[] = []; // per group, its leader's base URL ("" unknown)
  private leaders: string[] = []; // the distinct leaders' base URLs
  private next = 0;
  private lastFetch = -Infinity;
  /** A refresh is under way. */
  refreshing = false;

  /** Takes a table fetched from a node. */
  set(rt: Routes, scheme: string): void {
    if (!(rt.partitions > 0)) return;
    const groups = [...rt.groups].sort((a, b) => a.first - b.first);
    // A node that lags may answer with an older leader than one held: of two entries for the
    // same group, the higher term's stays.
    const held = new Map<string, Route>();
    if (this.partitions === rt.partitions) for (const g of this.groups) held.set(`${g.first}:${g.end}`, g);
    const bases: string[] = [];
    const leaders: string[] = [];
    groups.forEach((g, i) => {
      const h = held.get(`${g.first}:${g.end}`);
      if (h && h.term > g.term) groups[i] = g = h;
      bases[i] = '';
      if (!g.leaderHttp) return;
      bases[i] = `${scheme}://${g.leaderHttp}`;
      if (!leaders.includes(bases[i]!)) leaders.push(bases[i]!);
    });
    this.partitions = rt.partitions;
    this.groups = groups;
    this.bases = bases;
    this.leaders = leaders;
  }

  /** The index of the group holding partition p, or -1. */
  private group(p: number): number {
    // The first group whose end is past p (groups are sorted and do not overlap).
    let lo = 0;
    let hi = this.groups.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.groups[mid]!.end > p) hi = mid;
      else lo = mid + 1;
    }
    return lo < this.groups.length && this.groups[lo]!.first <= p ? lo : -1;
  }

  /** The base URL of the leader of a's partition, "" when unknown. */
  base(a: Actor): string {
    if (this.partitions === 0) return '';
    const i = this.group(partitionOf(a, this.partitions));
    return i >= 0 ? this.bases[i]! : '';
  }

  /**
   * In turn, the base URL of each node that leads a group ("" when none is known): work that
   * may run on any actor of a kind (issuing a nonce) runs there without a forward, the node
   * picking an actor it leads.
   */
  anyLeader(): string {
    if (this.leaders.length === 0) return '';
    return this.leaders[this.next++ % this.leaders.length]!;
  }

  /**
   * Records the leader an answer named for a's partition. An answer about another actor's
   * partition (a request that called several) teaches nothing about a's.
   */
  learn(a: Actor, f: Forwarded, scheme: string): void {
    if (this.partitions === 0) return;
    const p = partitionOf(a, this.partitions);
    if (f.partition !== p) return;
    const i = this.group(p);
    if (i < 0) return;
    this.bases[i] = `${scheme}://${f.addr}`;
    this.groups[i] = { ...this.groups[i]!, leader: '', leaderHttp: f.addr };
  }

  /** Drops base as a leader: it did not answer. */
  forget(base: string): void {
    this.bases = this.bases.map((b) => (b === base ? '' : b));
    this.leaders = this.leaders.filter((l) => l !== base);
  }

  /** Whether a refresh may start now: at most one at a time, one a second. */
  due(nowMs: number): boolean {
    if (nowMs - this.lastFetch < 1000 || this.refreshing) return false;
    this.lastFetch = nowMs;
    this.refreshing = true;
    return true;
  }
}

/** How many recently issued nonces the client remembers the issuer of. */
export const MAX_ISSUERS = 1 << 14;

/**
 * The node that issued each recent nonce, where its consume goes first. Bounded: the oldest
 * are forgotten (a Map keeps insertion order).
 */
export class Issuers {
  private readonly by = new Map<string, string>();

  remember(nonce: string, base: string): void {
    this.by.delete(nonce);
    this.by.set(nonce, base);
    if (this.by.size > MAX_ISSUERS) this.by.delete(this.by.keys().next().value!);
  }

  /** The base URL that issued nonce, "" when unknown. */
  issuer(nonce: string): string {
    return this.by.get(nonce) ?? '';
  }
}
