// What the client retries and how, against a scripted fetch: the Go client's policy
// (client/retry.go) — 429 and 503 on every call (budget_exceeded aside), connections that could
// not be made on every call, other network failures only on calls the contract makes safe to
// repeat — with capped, jittered backoff, Retry-After honoured, deadlines and aborts.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Shardkeeper } from '../../src/client.js';
import { ShardkeeperError, isShardkeeperError } from '../../src/errors.js';
import { backoffMs, normalizeRetry, parseRetryAfter, retryWaitMs } from '../../src/retry.js';

type Step = (url: string, init: RequestInit) => Response | Promise<Response>;

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
const apiError = (status: number, code: string, retryAfter?: number): Response =>
  json(status, { error: code, message: `a ${code}` }, retryAfter === undefined ? {} : { 'Retry-After': String(retryAfter) });
/** A connection that could not be made, as Node's fetch reports it. */
const refused = (): never => {
  throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }) });
};
/** A connection dropped after the request was sent. */
const dropped = (): never => {
  throw new TypeError('fetch failed', { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) });
};
const nonce = { nonce: 'ab_x', org_id: 'o', issued_at: 1, expires_at: 2 };
const consumed = { nonce: 'ab_x', used_at: 3 };

/** A client over a scripted fetch; calls records every request. */
function scripted(steps: Step[], opts: { urls?: string[]; retries?: number; timeoutMs?: number } = {}) {
  const calls: Array<{ url: string; body: string | undefined }> = [];
  const sk = new Shardkeeper({
    urls: opts.urls ?? ['http://a.test'],
    routing: false,
    retries: { retries: opts.retries ?? 4, baseDelayMs: 1, maxDelayMs: 4 },
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
    fetch: async (url, init) => {
      calls.push({ url, body: init.body as string | undefined });
      const step = steps[Math.min(calls.length - 1, steps.length - 1)]!;
      return step(url, init);
    },
  });
  return { sk, calls };
}

describe('what is retried', () => {
  test('503 and 429 on every call, even one that is not repeatable', async () => {
    const { sk, calls } = scripted([() => apiError(503, 'unavailable'), () => apiError(429, 'too_many_outstanding'), () => json(201, nonce)]);
    assert.equal((await sk.nonces.issue('o')).nonce, 'ab_x');
    assert.equal(calls.length, 3);
  });

  test('a connection that could not be made, on every call: the request never left', async () => {
    const { sk, calls } = scripted([refused, () => json(201, nonce)]);
    await sk.nonces.issue('o');
    assert.equal(calls.length, 2);
  });

  test('a dropped connection only on calls the contract makes repeatable', async () => {
    const issue = scripted([dropped, () => json(201, nonce)]);
    await assert.rejects(issue.sk.nonces.issue('o'), (err) => isShardkeeperError(err, 'network_error') && err.status === 0);
    assert.equal(issue.calls.length, 1, 'an issue is sent once');

    const challenge = scripted([dropped, () => json(200, { nonce: 'n', expires_at: 1 })]);
    await assert.rejects(challenge.sk.devices('r').challenge('d'), (err) => isShardkeeperError(err, 'network_error'));
    assert.equal(challenge.calls.length, 1, 'a challenge is sent once');

    const consume = scripted([dropped, () => json(200, consumed)]);
    await consume.sk.nonces.consume('ab_x', { orgId: 'o' });
    assert.equal(consume.calls.length, 2, 'a consume is repeated');
    const ids = consume.calls.map((c) => (JSON.parse(c.body!) as { request_id: string }).request_id);
    assert.match(ids[0]!, /^[A-Za-z0-9_-]{22}$/);
    assert.equal(ids[0], ids[1], 'with the same request id, which makes it safe');
  });

  test('budget_exceeded is the caller’s to decide', async () => {
    const { sk, calls } = scripted([() => apiError(429, 'budget_exceeded', 3600), () => json(201, {})]);
    await assert.rejects(
      sk.relayer('r.test').submit({ idempotencyKey: 'k', receiverId: 'b.test', actions: ['CreateAccount'] }),
      (err: ShardkeeperError) => err.code === 'budget_exceeded' && err.status === 429 && err.retryAfterMs === 3_600_000,
    );
    assert.equal(calls.length, 1);
  });

  test('other answers are returned at once, typed', async () => {
    for (const [status, code] of [[400, 'invalid_request'], [404, 'unknown_nonce'], [409, 'nonce_used'], [410, 'nonce_expired'], [500, 'internal']] as const) {
      const { sk, calls } = scripted([() => apiError(status, code), () => json(200, consumed)]);
      await assert.rejects(sk.nonces.consume('ab_x', { orgId: 'o' }), (err: ShardkeeperError) => {
        assert.ok(err instanceof ShardkeeperError);
        assert.deepEqual([err.status, err.code, err.message, err.retryAfterMs], [status, code, `a ${code}`, 0]);
        return true;
      });
      assert.equal(calls.length, 1, code);
    }
  });

  test('an answer that is not the contract’s: http_error, and invalid_response for a success that is not JSON', async () => {
    const proxyPage = scripted([() => new Response('<html>502 Bad Gateway</html>', { status: 502 })]);
    await assert.rejects(proxyPage.sk.nonces.get('ab_x'), (err: ShardkeeperError) => err.code === 'http_error' && err.status === 502 && err.message.includes('Bad Gateway'));
    const notJson = scripted([() => new Response('ok', { status: 200 })]);
    await assert.rejects(notJson.sk.nonces.get('ab_x'), (err: ShardkeeperError) => err.code === 'invalid_response' && err.status === 200);
    assert.equal(notJson.calls.length, 1);
  });

  test('at most retries + 1 attempts, then the last error', async () => {
    const { sk, calls } = scripted([() => apiError(503, 'unavailable')], { retries: 2 });
    await assert.rejects(sk.nonces.get('ab_x'), (err: ShardkeeperError) => err.code === 'unavailable' && err.status === 503);
    assert.equal(calls.length, 3);
    const none = scripted([() => apiError(503, 'unavailable')], { retries: 0 });
    await assert.rejects(none.sk.nonces.get('ab_x'));
    assert.equal(none.calls.length, 1);
  });

  test('attempts go round robin over the URLs, so a retry reaches another node', async () => {
    const { sk, calls } = scripted([() => apiError(503, 'unavailable'), () => apiError(503, 'unavailable'), () => json(200, nonce)], {
      urls: ['http://a.test', 'http://b.test', 'http://c.test'],
    });
    await sk.nonces.get('ab_x');
    assert.deepEqual(calls.map((c) => new URL(c.url).host), ['a.test', 'b.test', 'c.test']);
  });
});

describe('deadlines and aborts', () => {
  const hang: Step = (_url, init) =>
    new Promise((_resolve, reject) => init.signal!.addEventListener('abort', () => reject(init.signal!.reason), { once: true }));

  test('timeoutMs bounds the whole call: code timeout, status 0', async () => {
    const { sk } = scripted([hang], { timeoutMs: 100 });
    const t0 = Date.now();
    await assert.rejects(sk.nonces.get('ab_x'), (err: ShardkeeperError) => err.code === 'timeout' && err.status === 0);
    assert.ok(Date.now() - t0 < 2000);
  });

  test('an AbortSignal cancels a call in flight: code aborted', async () => {
    const { sk } = scripted([hang]);
    const ctl = new AbortController();
    const call = sk.nonces.get('ab_x', { signal: ctl.signal });
    ctl.abort();
    await assert.rejects(call, (err: ShardkeeperError) => err.code === 'aborted' && err.status === 0);
  });

  test('an AbortSignal already aborted sends nothing', async () => {
    const { sk, calls } = scripted([() => json(200, nonce)]);
    await assert.rejects(sk.nonces.get('ab_x', { signal: AbortSignal.abort() }), (err: ShardkeeperError) => err.code === 'aborted');
    assert.equal(calls.length, 0);
  });

  test('an abort during the wait between attempts ends the call at once', async () => {
    const { sk, calls } = scripted([() => apiError(503, 'unavailable', 30)]);
    const ctl = new AbortController();
    const call = sk.nonces.get('ab_x', { signal: ctl.signal, timeoutMs: 60_000 });
    while (calls.length === 0) await new Promise((r) => setImmediate(r));
    const t0 = Date.now();
    ctl.abort();
    await assert.rejects(call, (err: ShardkeeperError) => err.code === 'aborted' && isShardkeeperError(err.cause, 'unavailable'));
    assert.ok(Date.now() - t0 < 1000);
    assert.equal(calls.length, 1);
  });

  test('a wait that would end past the deadline is not started: the last answer is the error', async () => {
    const { sk, calls } = scripted([() => apiError(503, 'unavailable', 10)], { timeoutMs: 500 });
    const t0 = Date.now();
    await assert.rejects(sk.nonces.get('ab_x'), (err: ShardkeeperError) => err.code === 'unavailable' && err.retryAfterMs === 10_000);
    assert.ok(Date.now() - t0 < 400);
    assert.equal(calls.length, 1);
  });
});

describe('the backoff', () => {
  const p = normalizeRetry({ retries: 4, baseDelayMs: 50, maxDelayMs: 2000 });
  const err = (retryAfterMs: number): ShardkeeperError => new ShardkeeperError({ status: 503, code: 'unavailable', message: '', retryAfterMs });

  test('full jitter under a doubling, capped ceiling', () => {
    assert.equal(backoffMs(p, 1, 0), 0);
    assert.equal(backoffMs(p, 1, 0.999), 0.999 * 50);
    assert.equal(backoffMs(p, 3, 0.5), 100);
    assert.equal(backoffMs(p, 20, 0.5), 1000, 'capped at maxDelayMs');
    assert.equal(backoffMs(p, 2000, 0.5), 1000, 'no overflow');
  });

  test('Retry-After honoured in full, plus up to baseDelayMs of jitter', () => {
    assert.equal(retryWaitMs(p, 1, err(1000), 0.9, 0), 1000);
    assert.equal(retryWaitMs(p, 1, err(1000), 0.9, 0.5), 1025);
    assert.equal(retryWaitMs(p, 10, err(1), 0.5, 0), 1000, 'a backoff longer than Retry-After wins');
    assert.equal(retryWaitMs(p, 1, err(0), 0.5, 0.5), 25);
  });

  test('Retry-After: seconds or an HTTP date; anything else is none', () => {
    const now = Date.parse('2026-11-27T10:00:00Z');
    assert.equal(parseRetryAfter('3', now), 3000);
    assert.equal(parseRetryAfter(' 1 ', now), 1000);
    assert.equal(parseRetryAfter('Fri, 27 Nov 2026 10:00:05 GMT', now), 5000);
    assert.equal(parseRetryAfter('Fri, 27 Nov 2026 09:00:00 GMT', now), 0);
    for (const v of [null, '', '-1', 'soon', '1.5']) assert.equal(parseRetryAfter(v, now), 0, String(v));
  });

  test('the policy’s defaults are the Go client’s', () => {
    assert.deepEqual(normalizeRetry(undefined), { retries: 4, baseDelayMs: 50, maxDelayMs: 2000 });
    assert.deepEqual(normalizeRetry(0), { retries: 0, baseDelayMs: 50, maxDelayMs: 2000 });
    assert.deepEqual(normalizeRetry({ retries: -1, baseDelayMs: 0 }), { retries: 4, baseDelayMs: 50, maxDelayMs: 2000 });
  });
});

describe('failures before anything is sent are typed too', () => {
  test('a body JSON cannot carry, a key that cannot sign, a path segment that cannot be one', async () => {
    const { sk, calls } = scripted([() => json(201, {})]);
    await assert.rejects(
      sk.chain('main').append({ entityId: 'e', ver: 1, op: 'o', vis: 'v', manifest: { n: 1n } }),
      (err: ShardkeeperError) => err.code === 'invalid_argument' && err.status === 0,
    );
    const { signNonce } = await import('../../src/keys.js');
    const hmac = await crypto.subtle.generateKey({ name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    await assert.rejects(signNonce(hmac, 'n'), (err: ShardkeeperError) => err.code === 'invalid_argument');
    await assert.rejects(sk.devices('r').get(''), (err: ShardkeeperError) => err.code === 'invalid_argument');
    assert.throws(() => sk.devices('..'), (err: ShardkeeperError) => err.code === 'invalid_argument', 'a handle of a name that cannot be one throws at once');
    assert.equal(calls.length, 0);
  });
});
