// @ts-check
// A relay service on Express: a user's wallet signs a NEAR delegate action (NEP-366), posts it
// here, and shardkeeper's relayer pays for the transaction that carries it. The delegate's own
// hash (NEP-461) is the intent's idempotency key, so a request sent twice — a retry after a lost
// answer, a double click — relays it once.

import express from 'express';
import { isShardkeeperError, isTerminal } from '@shardkeeper/client';

/**
 * The relay app.
 *
 * @param {object} opts
 * @param {import('@shardkeeper/client').Shardkeeper} opts.sk a client with the relayer token
 * @param {string} opts.accountId the relayer account that pays
 * @param {number} [opts.waitMs] how long a request waits for the outcome (default 30000)
 */
export function relayApp({ sk, accountId, waitMs = 30_000 }) {
  const relayer = sk.relayer(accountId);
  const app = express();
  app.use(express.json({ limit: '64kb' }));

  // POST /relay {"signed_delegate": "<base64 of the borsh SignedDelegateAction>"}
  // → 200 with the intent record once it is terminal (succeeded, failed or rejected), 202 with
  // the record as it stands when the wait ends first: the caller asks again with the same body.
  app.post('/relay', async (req, res) => {
    const signed = req.body?.signed_delegate;
    if (typeof signed !== 'string' || signed === '') {
      res.status(400).json({ error: 'invalid_request', message: 'body must be {"signed_delegate": "<base64>"}' });
      return;
    }
    const submitted = await relayer.submitDelegate(signed);
    const intent = await relayer.wait(submitted.idempotencyKey, { timeoutMs: waitMs });
    res.status(isTerminal(intent) ? 200 : 202).json(intent);
  });

  // shardkeeper's refusals keep their status and code (a bad signature is 400 invalid_delegate,
  // a policy refusal 403 policy_denied, a spent budget 429 with Retry-After); a node that could
  // not be reached is 502.
  app.use((/** @type {unknown} */ err, /** @type {express.Request} */ _req, /** @type {express.Response} */ res, /** @type {express.NextFunction} */ next) => {
    if (!isShardkeeperError(err)) {
      next(err);
      return;
    }
    if (err.retryAfterMs > 0) res.set('Retry-After', String(Math.ceil(err.retryAfterMs / 1000)));
    res.status(err.status >= 400 ? err.status : 502).json({ error: err.code, message: err.message });
  });
  return app;
}
