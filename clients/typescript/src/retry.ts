// What is retried, and how long to wait first: the Go client's policy (client/retry.go), so
// that both clients treat the contract the same way. Only three things are retried:
//
//  - a 429 or 503 answer, on every call: the server says when to come back (Retry-After) and
//    the client waits at least that long — except 429 budget_exceeded (a relayer account's
//    deposit budget), whose wait may be hours: the caller decides;
//  - a connection that could not be made, on every call: the request never left, so sending
//    it again (to the next URL) cannot apply it twice;
//  - any other network failure (a connection dropped, an answer lost), only on calls the
//    contract makes safe to repeat: reads, device registration, server heartbeats, deletes,
//    nonce consume and device verify (made repeatable by a request_id), relayer submits (by
//    their idempotency_key) and chain appends (by entity_id and ver). Issuing a nonce and
//    asking for a challenge are not: the first attempt may have run, and only the caller knows
//    whether a second nonce is acceptable (a lost one expires unused).
//
// Every other answer is returned at once.

import { ShardkeeperError } from './errors.js';

/** How calls are retried. */
export interface RetryPolicy {
  /** Retries after the first attempt; 0 disables retries. Default 4 (5 attempts, as the Go client). */
  retries: number;
  /** The backoff ceiling before the first retry, doubled per retry up to maxDelayMs. Default 50. */
  baseDelayMs: number;
  /** The cap of the backoff ceiling (not of a server's Retry-After). Default 2000. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({ retries: 4, baseDelayMs: 50, maxDelayMs: 2000 });

/** policy with its missing or out-of-range fields set to the defaults. */
export function normalizeRetry(policy: number | Partial<RetryPolicy> | undefined): RetryPolicy {
  const p = typeof policy === 'number' ? { retries: policy } : (policy ?? {});
  return {
    retries: Number.isFinite(p.retries) && p.retries! >= 0 ? Math.floor(p.retries!) : DEFAULT_RETRY.retries,
    baseDelayMs: p.baseDelayMs !== undefined && p.baseDelayMs > 0 ? p.baseDelayMs : DEFAULT_RETRY.baseDelayMs,
    maxDelayMs: p.maxDelayMs !== undefined && p.maxDelayMs > 0 ? p.maxDelayMs : DEFAULT_RETRY.maxDelayMs,
  };
}

/**
 * The wait before retry n (1 for the first) when the server named no Retry-After: uniform in
 * [0, min(maxDelayMs, baseDelayMs·2^(n-1))) — "full jitter", so that clients failing together
 * do not come back together. u is uniform in [0, 1).
 */
export function backoffMs(p: RetryPolicy, n: number, u: number): number {
  const ceiling = Math.min(p.maxDelayMs, p.baseDelayMs * 2 ** Math.min(n - 1, 30));
  return u * ceiling;
}

/**
 * The wait before retry n after err. A Retry-After is honoured in full, plus a jitter of up to
 * baseDelayMs so that clients told the same second do not return in lockstep.
 */
export function retryWaitMs(p: RetryPolicy, n: number, err: ShardkeeperError, u1: number, u2: number): number {
  const d = backoffMs(p, n, u1);
  if (err.retryAfterMs > 0) return Math.max(d, err.retryAfterMs) + u2 * p.baseDelayMs;
  return d;
}

/** How one attempt failed. */
export interface AttemptFailure {
  error: ShardkeeperError;
  /** No answer was read: the connection failed or dropped. */
  network: boolean;
  /** The request provably never left: the connection could not be made. */
  unsent: boolean;
}

/** Whether an attempt that failed so may be retried (see the policy above). */
export function retryable(f: AttemptFailure, idempotent: boolean): boolean {
  const { error } = f;
  if (error.code === 'timeout' || error.code === 'aborted') return false;
  if (!f.network) {
    if (error.code === 'budget_exceeded') return false;
    return error.status === 429 || error.status === 503;
  }
  return f.unsent || idempotent;
}

/**
 * Error codes (Node's, undici's) of a connection that could not be made: the request never
 * reached a server. Runtimes that do not say why a fetch failed (browsers, Workers) give
 * none of these, and their failures count as possibly sent: safe, never a double write.
 */
const UNSENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** Whether err, thrown by fetch, says the connection could not be made. */
export function isUnsent(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && UNSENT_CODES.has(code)) return true;
    // undici wraps several connection attempts (IPv4 and IPv6) in an AggregateError.
    const errors = (e as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors.length > 0 && errors.every(isUnsent)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Reads a Retry-After header in milliseconds: whole seconds (the contract's form) or an HTTP
 * date. Absent or malformed is 0.
 */
export function parseRetryAfter(v: string | null, nowMs: number): number {
  if (!v) return 0;
  const s = v.trim();
  if (/^\d+$/.test(s)) return Number(s) * 1000;
  if (/^-\d+$/.test(s)) return 0;
  const t = Date.parse(s);
  return Number.isFinite(t) && t > nowMs ? t - nowMs : 0;
}
