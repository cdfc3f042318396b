// @ts-check
// A relay service as a Cloudflare Worker: a user's wallet signs a NEAR delegate action
// (NEP-366), posts it here, and shardkeeper's relayer pays for the transaction that carries it.
// The delegate's own hash (NEP-461) is the intent's idempotency key, so a request sent twice
// relays it once. Configured by the Worker's variables and secrets: SHARDKEEPER_URL,
// SHARDKEEPER_RELAYER_TOKEN (a secret), RELAYER_ACCOUNT_ID, and WAIT_MS (default 25000, within a
// Worker's wall-clock budget).

import { Shardkeeper, isShardkeeperError, isTerminal } from '@shardkeeper/client';

/**
 * @typedef {object} Env
 * @property {string} SHARDKEEPER_URL
 * @property {string} SHARDKEEPER_RELAYER_TOKEN
 * @property {string} RELAYER_ACCOUNT_ID
 * @property {string} [WAIT_MS]
 */

/** @param {unknown} body @param {number} status @param {Record<string, string>} [headers] */
const json = (body, status, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

/** WAIT_MS as a number of ms, 25000 when unset or not a number. @param {string | undefined} v */
const waitMs = (v) => {
  const n = Number(v);
  return v !== undefined && v !== '' && Number.isFinite(n) && n >= 0 ? n : 25_000;
};

export default {
  /** @param {Request} request @param {Env} env */
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname !== '/relay') return json({ error: 'not_found', message: 'POST /relay' }, 404);
    if (request.method !== 'POST') return json({ error: 'method_not_allowed', message: 'POST /relay' }, 405, { allow: 'POST' });
    /** @type {any} */
    let body;
    try {
      body = await request.json();
    } catch {
      body = undefined;
    }
    const signed = body?.signed_delegate;
    if (typeof signed !== 'string' || signed === '') {
      return json({ error: 'invalid_request', message: 'body must be {"signed_delegate": "<base64>"}' }, 400);
    }
    const sk = new Shardkeeper({ url: env.SHARDKEEPER_URL, relayerToken: env.SHARDKEEPER_RELAYER_TOKEN });
    const relayer = sk.relayer(env.RELAYER_ACCOUNT_ID);
    try {
      const submitted = await relayer.submitDelegate(signed);
      const intent = await relayer.wait(submitted.idempotencyKey, { timeoutMs: waitMs(env.WAIT_MS) });
      // 200 once terminal; 202 with the record as it stands when the wait ends first.
      return json(intent, isTerminal(intent) ? 200 : 202);
    } catch (err) {
      if (!isShardkeeperError(err)) throw err;
      // shardkeeper's refusals keep their status and code; a node not reached is 502.
      const headers = err.retryAfterMs > 0 ? { 'retry-after': String(Math.ceil(err.retryAfterMs / 1000)) } : undefined;
      return json({ error: err.code, message: err.message }, err.status >= 400 ? err.status : 502, headers);
    }
  },
};
