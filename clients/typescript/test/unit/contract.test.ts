// The client against api/openapi.yaml: every operation is either called by a client method —
// whose request, sent through a recording fetch, must have the operation's method, path,
// query and body fields, and whose answer must come back with every field of the response
// schema — or listed below as deliberately left out, with the reason. Every record shape the
// client converts with must name exactly the schema's fields, nested records included. So a
// route or a field added to the API without the client following fails here.
//
// SHARDKEEPER_OPENAPI names another document to check (a copy, to see this test fail).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { API_ERROR_CODES } from '../../src/errors.js';
import { Shardkeeper } from '../../src/client.js';
import { APPEND_REQUEST, ANCHORED_ENTITY, CHAIN_ACCEPTED, CHAIN_EVENT, CHAIN_HEAD, CHAIN_PROOF, ENTITY_VERSION, RETRIED } from '../../src/chain.js';
import { CHALLENGE, CHALLENGE_REQUEST, DEVICE, DEVICE_REGISTERED, REGISTER_REQUEST, VERIFICATION, VERIFY_REQUEST } from '../../src/devices.js';
import { CONSUME_REQUEST, CONSUMED, ISSUE_REQUEST, NONCE } from '../../src/nonces.js';
import { CLUSTER } from '../../src/ops.js';
import { INTENT, NEAR_ACTION_KINDS, RELAYER_STATUS, SUBMIT_REQUEST } from '../../src/relayer.js';
import { ROUTES } from '../../src/routing.js';
import { HEARTBEAT_REQUEST, SERVER_LIST, SERVER_REGISTERED } from '../../src/servers.js';
import type { Field, Shape } from '../../src/wire.js';
import { repoRoot } from '../support/paths.js';

type Schema = Record<string, unknown>;
const doc = parse(readFileSync(process.env['SHARDKEEPER_OPENAPI'] ?? join(repoRoot(), 'api', 'openapi.yaml'), 'utf8')) as {
  paths: Record<string, Record<string, Schema>>;
  components: Record<string, Record<string, Schema>>;
};

/** A schema with its $ref and allOf resolved. */
function resolve(s: unknown): Schema {
  let schema = (s ?? {}) as Schema;
  while (typeof schema['$ref'] === 'string') {
    const [, , section, name] = (schema['$ref'] as string).split('/');
    schema = doc.components[section!]![name!]!;
  }
  if (Array.isArray(schema['allOf'])) {
    const merged: Schema = { ...schema };
    delete merged['allOf'];
    for (const part of schema['allOf'] as unknown[]) Object.assign(merged, resolve(part));
    return merged;
  }
  return schema;
}

/** The JSON schema of an operation's request body, or of its first 2xx answer with a body. */
function requestSchema(op: Schema): Schema | undefined {
  const body = resolve(op['requestBody']);
  const content = body['content'] as Record<string, Schema> | undefined;
  return content?.['application/json'] ? resolve(content['application/json']['schema']) : undefined;
}

function responseSchema(op: Schema): { schema?: Schema; text: boolean } {
  const responses = op['responses'] as Record<string, unknown>;
  for (const code of Object.keys(responses).filter((c) => c.startsWith('2')).sort()) {
    const content = resolve(responses[code])['content'] as Record<string, Schema> | undefined;
    if (content?.['application/json']?.['schema']) return { schema: resolve(content['application/json']['schema']), text: false };
    if (content?.['text/plain']) return { text: true };
  }
  return { text: false };
}

/** The declared fields of an object schema (undefined for a scalar or a free-form object). */
function fieldsOf(schema: Schema): Record<string, Schema> | undefined {
  const props = schema['properties'] as Record<string, Schema> | undefined;
  return props && Object.keys(props).length > 0 ? props : undefined;
}

/**
 * Differences between a shape and a schema, as "path: why" lines: each must name exactly the
 * other's fields, and a field that is a record in the schema must be a nested shape.
 */
function compare(shape: Shape, schema: Schema, at: string): string[] {
  const props = fieldsOf(schema) ?? {};
  const out: string[] = [];
  for (const k of Object.keys(props)) if (!(k in shape)) out.push(`${at}.${k}: in openapi.yaml, not in the client's shape`);
  for (const k of Object.keys(shape)) if (!(k in props)) out.push(`${at}.${k}: in the client's shape, not in openapi.yaml`);
  for (const [k, field] of Object.entries(shape)) {
    if (!(k in props)) continue;
    const s = resolve(props[k]);
    const items = s['type'] === 'array' ? resolve(s['items']) : undefined;
    const nested = items ? fieldsOf(items) && items : fieldsOf(s) && s;
    if (nested) {
      if (typeof field === 'string') out.push(`${at}.${k}: a record in openapi.yaml, copied as is by the client`);
      else if (Boolean(field.list) !== Boolean(items)) out.push(`${at}.${k}: list-ness differs`);
      else out.push(...compare(field.shape, nested, `${at}.${k}`));
    } else if (typeof field !== 'string') {
      out.push(`${at}.${k}: not a record in openapi.yaml, a nested shape in the client`);
    }
  }
  return out;
}

/** A sample wire value of a schema: every declared field filled, nested records included. */
function sample(s: unknown): unknown {
  const schema = resolve(s);
  if (schema['type'] === 'array') return [sample(schema['items'])];
  const props = fieldsOf(schema);
  if (props) return Object.fromEntries(Object.entries(props).map(([k, v]) => [k, sample(v)]));
  const t = Array.isArray(schema['type']) ? (schema['type'] as string[])[0] : schema['type'];
  if (t === 'integer' || t === 'number') return 1;
  if (t === 'boolean') return true;
  if (t === 'object') return {};
  return 'x';
}

/** The client names (camelCase) a decoded record must carry for a shape, nested included. */
function checkDecoded(shape: Shape, value: unknown, at: string, narrows: string[] = []): string[] {
  if (value === null || typeof value !== 'object') return [`${at}: not a record`];
  const v = value as Record<string, unknown>;
  const out: string[] = [];
  for (const [wire, field] of Object.entries(shape)) {
    const name = typeof field === 'string' ? field : field.name;
    if (narrows.includes(name)) continue;
    if (!(name in v)) {
      out.push(`${at}.${name}: missing from the answer (wire ${wire})`);
      continue;
    }
    if (typeof field !== 'string') {
      const x = field.list ? (v[name] as unknown[])[0] : v[name];
      out.push(...checkDecoded(field.shape, x, `${at}.${name}`));
    }
  }
  return out;
}

/** An operation the client calls. */
interface Covered {
  op: string;
  /** Calls of the client that send this operation; their bodies must together hold every request field. */
  calls: Array<(sk: Shardkeeper) => Promise<unknown>>;
  request?: Shape;
  response?: Shape;
  /**
   * Client fields the call's result leaves out on purpose: one schema (ChainProof) serves both
   * proofs, and each proof carries only its own pair of sizes.
   */
  narrows?: string[];
}

const KEY = 'Xc2mfhAQ1yWl1C4d8u1ZC0q3uG8pSxsJY1Xq8i9r0cE=';
const SIG = 'eDpa9ADnTYR7RFxYASZerSRZ1xz5qFmX4JdK2XvcndVkmNod2JU1cprh7NCdZx4bidFxs9yGXgRjLMo5GPk9Ag==';

const covered: Covered[] = [
  {
    op: 'POST /v1/attest/{registry}/register',
    calls: [(sk) => sk.devices('r').register({ deviceId: 'd', version: 'v', platform: 'p', buildHash: 'b', publicKey: KEY, nonce: 'n', signature: SIG })],
    request: REGISTER_REQUEST,
    response: DEVICE_REGISTERED,
  },
  { op: 'POST /v1/attest/{registry}/challenge', calls: [(sk) => sk.devices('r').challenge('d')], request: CHALLENGE_REQUEST, response: CHALLENGE },
  {
    op: 'POST /v1/attest/{registry}/verify',
    calls: [(sk) => sk.devices('r').verify({ deviceId: 'd', nonce: 'n', signature: SIG })],
    request: VERIFY_REQUEST,
    response: VERIFICATION,
  },
  { op: 'GET /v1/attest/{registry}/devices/{device_id}', calls: [(sk) => sk.devices('r').get('d')], response: DEVICE },
  { op: 'DELETE /v1/attest/{registry}/devices/{device_id}', calls: [(sk) => sk.devices('r').delete('d')] },
  {
    op: 'PUT /v1/servers/{registry}/{server_id}',
    calls: [(sk) => sk.servers('r').heartbeat('s', { address: 'a', region: 'r', meta: { k: 1 } })],
    request: HEARTBEAT_REQUEST,
    response: SERVER_REGISTERED,
  },
  { op: 'DELETE /v1/servers/{registry}/{server_id}', calls: [(sk) => sk.servers('r').delete('s')] },
  { op: 'GET /v1/servers/{registry}', calls: [(sk) => sk.servers('r').list().then((servers) => ({ servers }))], response: SERVER_LIST },
  { op: 'POST /v1/nonces', calls: [(sk) => sk.nonces.issue('o')], request: ISSUE_REQUEST, response: NONCE },
  { op: 'POST /v1/nonces/{nonce}/consume', calls: [(sk) => sk.nonces.consume('ab_c', { orgId: 'o', requestId: 'r' })], request: CONSUME_REQUEST, response: CONSUMED },
  { op: 'GET /v1/nonces/{nonce}', calls: [(sk) => sk.nonces.get('ab_c')], response: NONCE },
  {
    op: 'POST /v1/relayers/{account_id}/intents',
    calls: [
      (sk) => sk.relayer('a.test').submit({ idempotencyKey: 'k', receiverId: 'b.test', actions: ['CreateAccount'] }),
      (sk) => sk.relayer('a.test').submitDelegate('AAAA', { idempotencyKey: 'k' }),
    ],
    request: SUBMIT_REQUEST,
    response: INTENT,
  },
  { op: 'GET /v1/relayers/{account_id}/intents/{idempotency_key}', calls: [(sk) => sk.relayer('a.test').wait('k', { timeoutMs: 1000 })], response: INTENT },
  { op: 'GET /v1/relayers/{account_id}', calls: [(sk) => sk.relayer('a.test').status()], response: RELAYER_STATUS },
  {
    op: 'POST /v1/chains/{chain}/events',
    calls: [(sk) => sk.chain('c').append({ entityId: 'e', ver: 1, op: 'o', vis: 'v', ts: 1, cid: 'c', manifest: {} })],
    request: APPEND_REQUEST,
    response: CHAIN_ACCEPTED,
  },
  { op: 'GET /v1/chains/{chain}/checkpoint', calls: [(sk) => sk.chain('c').checkpoint()] },
  { op: 'GET /v1/chains/{chain}/proof/inclusion', calls: [(sk) => sk.chain('c').inclusionProof(1, 2)], response: CHAIN_PROOF, narrows: ['from', 'to'] },
  { op: 'GET /v1/chains/{chain}/proof/consistency', calls: [(sk) => sk.chain('c').consistencyProof(1, 2)], response: CHAIN_PROOF, narrows: ['seq', 'size'] },
  { op: 'POST /v1/chains/{chain}/retry', calls: [(sk) => sk.chain('c').retry().then((requeued) => ({ requeued }))], response: RETRIED },
  { op: 'GET /v1/chains/{chain}/head', calls: [(sk) => sk.chain('c').head()], response: CHAIN_HEAD },
  { op: 'GET /v1/chains/{chain}/events/{seq}', calls: [(sk) => sk.chain('c').event(1)], response: CHAIN_EVENT },
  { op: 'GET /v1/chains/{chain}/entities/{entity_id}', calls: [(sk) => sk.chain('c').entity('e')], response: ANCHORED_ENTITY },
  { op: 'GET /v1/chains/{chain}/entities/{entity_id}/versions/{ver}', calls: [(sk) => sk.chain('c').version('e', 1)], response: ENTITY_VERSION },
  { op: 'GET /healthz', calls: [(sk) => sk.healthz()] },
  { op: 'GET /readyz', calls: [(sk) => sk.readyz()] },
  { op: 'GET /v1/cluster', calls: [(sk) => sk.cluster()], response: CLUSTER },
  { op: 'GET /v1/cluster/routes', calls: [(sk) => sk.routes()], response: ROUTES },
];

/** Operations the client leaves out on purpose. */
const leftOut: Record<string, string> = {
  'POST /attest/register': 'compatibility path of POST /v1/attest/default/register, which devices("default") calls',
  'POST /attest/challenge': 'compatibility path of POST /v1/attest/default/challenge',
  'POST /attest/verify': 'compatibility path of POST /v1/attest/default/verify',
  'GET /servers': 'compatibility path of GET /v1/servers/default',
  'POST /servers': 'compatibility path of PUT /v1/servers/default/{server_id}',
  'GET /metrics': 'Prometheus text for scrapers, not for applications',
  'GET /openapi.yaml': 'this document',
  'GET /ui': "the operator's dashboard (HTML)",
  'GET /v1/cluster/gossip-keys': 'operator tooling: `shardkeeper gossip-key`',
  'POST /v1/cluster/gossip-keys': 'operator tooling: `shardkeeper gossip-key`',
  'GET /v1/cluster/hashes': 'a replica diagnostic for operators',
};

const operations = Object.entries(doc.paths).flatMap(([path, item]) =>
  Object.keys(item)
    .filter((m) => ['get', 'put', 'post', 'delete', 'patch'].includes(m))
    .map((m) => ({ op: `${m.toUpperCase()} ${path}`, method: m.toUpperCase(), path, spec: item[m]!, pathParams: item['parameters'] })),
);

interface Recorded {
  method: string;
  path: string;
  query: URLSearchParams;
  body: Record<string, unknown> | undefined;
}

/** A client whose fetch records the request and answers a sample of the operation's response. */
function recordingClient(answer: () => Response, log: Recorded[]): Shardkeeper {
  return new Shardkeeper({
    url: 'http://node.test',
    retries: 0,
    adminToken: 'a',
    relayerToken: 'r',
    chainToken: 'c',
    serversToken: 's',
    fetch: async (input, init) => {
      const u = new URL(input);
      log.push({ method: init.method ?? 'GET', path: u.pathname, query: u.searchParams, body: init.body ? (JSON.parse(init.body as string) as Record<string, unknown>) : undefined });
      return answer();
    },
  });
}

describe('the client covers api/openapi.yaml', () => {
  test('every operation is called by the client or left out with a reason', () => {
    const known = new Set([...covered.map((c) => c.op), ...Object.keys(leftOut)]);
    const missing = operations.filter((o) => !known.has(o.op)).map((o) => o.op);
    assert.deepEqual(missing, [], `operations in openapi.yaml the client neither calls nor leaves out: ${missing.join(', ')}`);
    const stale = [...known].filter((op) => !operations.some((o) => o.op === op));
    assert.deepEqual(stale, [], `operations the client lists that openapi.yaml no longer has: ${stale.join(', ')}`);
  });

  for (const c of covered) {
    test(c.op, async () => {
      const o = operations.find((x) => x.op === c.op);
      assert.ok(o, `${c.op} is not in openapi.yaml`);
      const reqSchema = requestSchema(o.spec);
      const res = responseSchema(o.spec);
      const problems: string[] = [];
      if (reqSchema) {
        assert.ok(c.request, `${c.op} has a request body in openapi.yaml; name the client's request shape`);
        problems.push(...compare(c.request, reqSchema, 'request'));
      } else assert.equal(c.request, undefined, `${c.op} has no request body in openapi.yaml`);
      if (res.schema) {
        assert.ok(c.response, `${c.op} answers a JSON body in openapi.yaml; name the client's response shape`);
        problems.push(...compare(c.response, res.schema, 'response'));
      } else assert.equal(c.response, undefined, `${c.op} answers no JSON body in openapi.yaml`);

      const template = new RegExp('^' + o.path.replace(/\{[^}]+\}/g, '[^/]+') + '$');
      const params = [...((o.spec['parameters'] as Schema[] | undefined) ?? []), ...((o.pathParams as unknown as Schema[] | undefined) ?? [])].map(resolve);
      const queryNames = new Set(params.filter((p) => p['in'] === 'query').map((p) => p['name'] as string));
      const sent = new Set<string>();
      for (const call of c.calls) {
        const log: Recorded[] = [];
        const answer = (): Response =>
          res.text
            ? new Response('log/c\n1\nAAAA\n\n— log sig\n', { status: 200 })
            : new Response(res.schema ? JSON.stringify(sample(res.schema)) : null, { status: res.schema ? 200 : 204 });
        const result = await call(recordingClient(answer, log));
        assert.ok(log.length >= 1, `${c.op}: the call sent nothing`);
        for (const r of log) {
          assert.equal(r.method, o.method, `${c.op}: the call sent ${r.method} ${r.path}`);
          assert.match(r.path, template, `${c.op}: the call sent ${r.method} ${r.path}`);
          for (const q of r.query.keys()) assert.ok(queryNames.has(q), `${c.op}: query parameter ${q} is not in openapi.yaml`);
          for (const k of Object.keys(r.body ?? {})) sent.add(k);
        }
        if (c.response) problems.push(...checkDecoded(c.response, result, 'answer', c.narrows));
      }
      if (reqSchema) {
        const fields = Object.keys(fieldsOf(reqSchema) ?? {});
        const unsent = fields.filter((f) => !sent.has(f));
        if (unsent.length) problems.push(`request: the client's calls never send ${unsent.join(', ')}`);
        for (const k of sent) if (!fields.includes(k)) problems.push(`request: the client sends ${k}, which openapi.yaml does not have`);
      }
      assert.deepEqual(problems, []);
    });
  }

  test('the error codes are the contract’s', () => {
    const codes = (resolve(doc.components['schemas']!['Error'])['properties'] as Record<string, Schema>)['error']!['enum'] as string[];
    assert.deepEqual([...API_ERROR_CODES].sort(), [...codes].sort());
  });

  test('the relayer’s action kinds are the contract’s', () => {
    const variants = resolve(doc.components['schemas']!['NearAction'])['oneOf'] as Schema[];
    const kinds = variants.flatMap((v) => (v['enum'] as string[] | undefined) ?? (v['required'] as string[]));
    assert.deepEqual([...NEAR_ACTION_KINDS].sort(), [...kinds].sort());
  });
});

// Keep the Field type in use for readers: shapes are records of Fields.
export type { Field };
