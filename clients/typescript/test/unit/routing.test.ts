// Routing over several nodes, as the Go client does it (client/routing.go): the partition of an
// actor as the server computes it (golden vectors from actors.PartitionOf), requests for one
// actor sent to its partition's leader after the routing table, the leader an answer names
// taken at once, a leader that does not answer dropped, the table refreshed at most once a
// second, issues to leaders in turn and consumes to the node that issued the nonce.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Shardkeeper } from '../../src/client.js';
import { ActorKind, Issuers, MAX_ISSUERS, RoutingTable, nonceActor, partitionOf } from '../../src/routing.js';
import { packageRoot } from '../support/paths.js';

interface PartitionVector {
  kind: string;
  id: string;
  partitions: number;
  partition: number;
}

test('partitions are the server’s (actors.PartitionOf)', () => {
  const { partitions } = JSON.parse(readFileSync(join(packageRoot(), 'test', 'vectors', 'partitions.json'), 'utf8')) as {
    partitions: PartitionVector[];
  };
  assert.ok(partitions.length > 100);
  for (const v of partitions) assert.equal(partitionOf({ kind: v.kind, id: v.id }, v.partitions), v.partition, `${v.kind}/${v.id} among ${v.partitions}`);
});

test('a nonce is routed to the shard that issued it: its first two characters', () => {
  assert.deepEqual(nonceActor('5b_t2yu-pIDsxl'), { kind: 'nonce-oracle', id: '5b' });
  assert.equal(nonceActor('5bt2yu'), undefined);
  assert.equal(nonceActor('5b'), undefined);
});

/** Three nodes of a cluster of 8 partitions, as a scripted fetch. */
function cluster(opts: { routes?: () => unknown; forward?: (host: string, path: string) => { leader: string; partition: number } | undefined; down?: Set<string> } = {}) {
  const calls: Array<{ host: string; method: string; path: string }> = [];
  const routes =
    opts.routes ??
    (() => ({
      epoch: 1,
      partitions: 8,
      groups: [
        { group: 0, first: 0, end: 3, term: 2, leader: 'n1', leader_http: 'n1.test' },
        { group: 1, first: 3, end: 6, term: 2, leader: 'n2', leader_http: 'n2.test' },
        { group: 2, first: 6, end: 8, term: 2, leader: 'n3', leader_http: 'n3.test' },
      ],
    }));
  const fetch = async (url: string, init: RequestInit): Promise<Response> => {
    const u = new URL(url);
    calls.push({ host: u.host, method: init.method ?? 'GET', path: u.pathname });
    if (opts.down?.has(u.host)) throw new TypeError('fetch failed', { cause: Object.assign(new Error('reset'), { code: 'ECONNRESET' }) });
    if (u.pathname === '/v1/cluster/routes') return Response.json(routes());
    const headers = new Headers({ 'Content-Type': 'application/json' });
    const fwd = opts.forward?.(u.host, u.pathname);
    if (fwd) {
      headers.set('Shardkeeper-Leader', fwd.leader);
      headers.set('Shardkeeper-Partition', String(fwd.partition));
    }
    if (u.pathname === '/v1/nonces') return new Response(JSON.stringify({ nonce: `${u.host.slice(1, 2)}x_nonce`, org_id: 'o', issued_at: 1, expires_at: 2 }), { status: 201, headers });
    if (u.pathname.endsWith('/consume')) return new Response(JSON.stringify({ nonce: 'n', used_at: 1 }), { headers });
    return new Response(JSON.stringify({ servers: [] }), { headers });
  };
  const sk = new Shardkeeper({ urls: ['http://n1.test', 'http://n2.test', 'http://n3.test'], fetch, routing: true, retries: { retries: 2, baseDelayMs: 1 } });
  return { sk, calls };
}

/** The leader host of a server registry's partition in the scripted table. */
const leaderOf = (registry: string): string => {
  const p = partitionOf({ kind: ActorKind.servers, id: registry }, 8);
  return p < 3 ? 'n1.test' : p < 6 ? 'n2.test' : 'n3.test';
};

/** Registry names whose partitions three different leaders lead. */
const registries = (): string[] => {
  const byLeader = new Map<string, string>();
  for (let i = 0; byLeader.size < 3; i++) if (!byLeader.has(leaderOf(`r${i}`))) byLeader.set(leaderOf(`r${i}`), `r${i}`);
  return [...byLeader.values()];
};

describe('routing by the table', () => {
  test('after refreshRoutes each actor’s requests go to its leader', async () => {
    const { sk, calls } = cluster();
    await sk.refreshRoutes();
    calls.length = 0;
    for (const r of registries()) await sk.servers(r).list();
    assert.deepEqual(calls.map((c) => c.host), registries().map(leaderOf));
  });

  test('the table is fetched on first use, in the background', async () => {
    const { sk, calls } = cluster();
    // No table yet: the first requests go round robin while the table is fetched; then they
    // go to the leader (the fetch is a macrotask or two away: bounded by attempts, not time).
    const leader = leaderOf('r0');
    for (let i = 0; i < 100; i++) {
      calls.length = 0;
      await sk.servers('r0').list();
      if (calls[0]!.host === leader && i > 0) break;
      await new Promise((r) => setImmediate(r));
    }
    assert.equal(calls[0]!.host, leader);
    assert.ok(calls.length === 1);
  });

  test('the leader a forwarded answer names is taken at once; the table refreshes at most once a second', async () => {
    const r = registries()[0]!;
    const p = partitionOf({ kind: ActorKind.servers, id: r }, 8);
    let moved = false;
    const { sk, calls } = cluster({ forward: (host) => (moved && host !== 'n9.test' ? { leader: 'n9.test', partition: p } : undefined) });
    await sk.refreshRoutes();
    moved = true;
    calls.length = 0;
    await sk.servers(r).list(); // goes to the stale leader, which forwards and names n9
    assert.equal(calls[0]!.host, leaderOf(r));
    await sk.servers(r).list();
    assert.equal(calls.filter((c) => c.path !== '/v1/cluster/routes')[1]!.host, 'n9.test');
    for (let i = 0; i < 5; i++) await sk.servers(registries()[1]!).list();
    assert.ok(calls.filter((c) => c.path === '/v1/cluster/routes').length <= 1, 'one refresh within the second');
  });

  test('a leader naming another partition teaches nothing about this one', () => {
    const t = new RoutingTable();
    t.set({ epoch: 0, partitions: 8, groups: [{ group: 0, first: 0, end: 8, term: 1, leader: 'n1', leaderHttp: 'n1.test' }] }, 'http');
    const a = { kind: ActorKind.servers, id: 'r0' };
    const p = partitionOf(a, 8);
    t.learn(a, { addr: 'n9.test', partition: (p + 1) % 8 }, 'http');
    assert.equal(t.base(a), 'http://n1.test');
    t.learn(a, { addr: 'n9.test', partition: p }, 'http');
    assert.equal(t.base(a), 'http://n9.test');
  });

  test('a leader that does not answer is dropped, and the table fetched again', async () => {
    const r = registries().find((x) => leaderOf(x) === 'n2.test')!;
    const down = new Set<string>();
    const { sk, calls } = cluster({ down });
    await sk.refreshRoutes();
    down.add('n2.test');
    calls.length = 0;
    await sk.servers(r).list(); // routed to n2, which fails; a retry reaches another node
    assert.equal(calls[0]!.host, 'n2.test');
    assert.ok(calls.some((c) => c.host !== 'n2.test' && c.path.startsWith('/v1/servers/')));
    for (let i = 0; i < 100 && !calls.some((c) => c.path === '/v1/cluster/routes'); i++) await new Promise((res) => setImmediate(res));
    assert.ok(calls.some((c) => c.path === '/v1/cluster/routes'), 'a refresh of the table started');

    const t = new RoutingTable();
    t.set({ epoch: 0, partitions: 8, groups: [{ group: 0, first: 0, end: 8, term: 1, leader: 'n2', leaderHttp: 'n2.test' }] }, 'http');
    t.forget('http://n2.test');
    assert.equal(t.base({ kind: ActorKind.servers, id: r }), '');
    assert.equal(t.anyLeader(), '');
  });

  test('a lagging node’s older leader does not replace a newer one', () => {
    const t = new RoutingTable();
    const g = (term: number, leaderHttp: string) => ({ epoch: 0, partitions: 8, groups: [{ group: 0, first: 0, end: 8, term, leader: 'x', leaderHttp }] });
    t.set(g(5, 'new.test'), 'http');
    t.set(g(4, 'old.test'), 'http');
    assert.equal(t.base({ kind: 'chain', id: 'main' }), 'http://new.test');
    t.set(g(6, 'newer.test'), 'http');
    assert.equal(t.base({ kind: 'chain', id: 'main' }), 'http://newer.test');
  });

  test('refreshes are due at most once a second, one at a time', () => {
    const t = new RoutingTable();
    assert.equal(t.due(10_000), true);
    assert.equal(t.due(10_500), false);
    t.refreshing = false;
    assert.equal(t.due(10_999), false);
    assert.equal(t.due(11_000), true);
    assert.equal(t.due(12_500), false, 'one at a time');
  });
});

describe('nonces', () => {
  test('issues go to the leaders in turn; a consume goes first to the node that issued the nonce', async () => {
    const calls: string[] = [];
    const fetch = async (url: string, init: RequestInit): Promise<Response> => {
      const u = new URL(url);
      calls.push(`${init.method} ${u.host}${u.pathname}`);
      if (u.pathname === '/v1/nonces') return new Response(JSON.stringify({ nonce: `${u.host.slice(0, 2)}_n`, org_id: 'o', issued_at: 1, expires_at: 2 }), { status: 201 });
      return Response.json({ nonce: 'x', used_at: 1 });
    };
    const sk = new Shardkeeper({ urls: ['http://aa.test', 'http://bb.test', 'http://cc.test'], fetch, routing: false });
    const issued = [await sk.nonces.issue('o'), await sk.nonces.issue('o'), await sk.nonces.issue('o')];
    calls.length = 0;
    for (const n of issued.reverse()) await sk.nonces.consume(n.nonce, { orgId: 'o' });
    assert.deepEqual(calls, ['POST cc.test/v1/nonces/cc_n/consume', 'POST bb.test/v1/nonces/bb_n/consume', 'POST aa.test/v1/nonces/aa_n/consume']);
  });

  test('the issuers remembered are bounded, the oldest forgotten first', () => {
    const h = new Issuers();
    for (let i = 0; i < MAX_ISSUERS + 10; i++) h.remember(`n${i}`, 'http://a.test');
    assert.equal(h.issuer('n0'), '');
    assert.equal(h.issuer('n9'), '');
    assert.equal(h.issuer('n10'), 'http://a.test');
    assert.equal(h.issuer(`n${MAX_ISSUERS + 9}`), 'http://a.test');
  });
});
