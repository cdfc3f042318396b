// Routing against a real node's routing table (GET /v1/cluster/routes): given a proxy's URL and
// the node's own, a client that routes sends each actor's requests straight to the leader the
// table names — the node — and none through the proxy; one that does not goes round robin, and
// sends a consume to the URL that issued its nonce.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Shardkeeper } from '../../src/client.js';
import { FaultProxy } from '../support/faultproxy.js';
import { type Stack, clientOptions, unique, useStack } from '../support/stack.js';

let stack: Stack;
let proxy: FaultProxy;
before(async () => {
  stack = await useStack();
  proxy = await FaultProxy.start(stack.url);
});
after(async () => {
  await proxy.close();
  await stack.stop();
});

test('the routing table sends every actor’s requests to its leader', async () => {
  const sk = new Shardkeeper(clientOptions(stack, { urls: [proxy.url, stack.url], routing: true }));
  const table = await sk.refreshRoutes();
  assert.ok(table.partitions > 0 && table.groups.length > 0);
  assert.ok(table.groups.every((g) => `http://${g.leaderHttp}` === stack.url), 'one node leads every group');
  const before = proxy.seen.length;
  const org = unique('org');
  for (let i = 0; i < 4; i++) {
    const n = await sk.nonces.issue(org);
    await sk.nonces.consume(n.nonce, { orgId: org });
    await sk.servers(unique('prod')).list();
    await sk.chain(unique('main')).head();
  }
  assert.equal(proxy.seen.length - before, 0, 'nothing went through the proxy');
});

test('without routing, attempts go round robin and a consume goes to the node that issued its nonce', async () => {
  const sk = new Shardkeeper(clientOptions(stack, { urls: [proxy.url, stack.url], routing: false }));
  const org = unique('org');
  const viaProxy = await sk.nonces.issue(org); // the first URL: the proxy
  const direct = await sk.nonces.issue(org); // then the node
  await sk.nonces.consume(direct.nonce, { orgId: org });
  await sk.nonces.consume(viaProxy.nonce, { orgId: org });
  const seen = proxy.requests({ method: 'POST' }).filter((s) => s.body.includes(org) || s.path.includes(viaProxy.nonce) || s.path.includes(direct.nonce));
  assert.deepEqual(
    seen.map((s) => s.path),
    ['/v1/nonces', `/v1/nonces/${viaProxy.nonce}/consume`],
    'each consume went where its nonce was issued',
  );
});
