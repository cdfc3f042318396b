// Every failure of the client is a ShardkeeperError: an error answer of the server (its
// contract code), a request that got no answer (status 0), or a check the client made itself
// (a proof, an argument). Callers branch on `code`, never on `message`.

/** The error codes of the HTTP contract (docs/api.md, "Error codes"). */
export const API_ERROR_CODES = [
  'invalid_request',
  'invalid_id',
  'invalid_delegate',
  'unsupported_action',
  'cid_mismatch',
  'invalid_signature',
  'unauthorized',
  'admin_disabled',
  'relayer_disabled',
  'chain_disabled',
  'org_mismatch',
  'policy_denied',
  'not_found',
  'unknown_device',
  'unknown_nonce',
  'unknown_server',
  'unknown_relayer',
  'unknown_intent',
  'unknown_event',
  'chain_log_disabled',
  'unknown_entity',
  'unknown_version',
  'method_not_allowed',
  'nonce_used',
  'device_exists',
  'idempotency_conflict',
  'event_conflict',
  'gossip_key_refused',
  'nonce_expired',
  'body_too_large',
  'too_many_pending',
  'too_many_outstanding',
  'queue_full',
  'budget_exceeded',
  'rate_limited',
  'registry_full',
  'unavailable',
  'internal',
] as const;

/** An error code of the HTTP contract. */
export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

/** The codes of failures the client itself detects. */
export const CLIENT_ERROR_CODES = [
  // The request got no answer: the connection failed or dropped. status is 0. The request may
  // or may not have run (unless it never left: see retries in the README).
  'network_error',
  // The call's deadline (timeoutMs) passed. status is 0.
  'timeout',
  // The caller's AbortSignal fired. status is 0.
  'aborted',
  // An error answer without the contract's JSON body (a proxy's 502 page, say). status is
  // the answer's.
  'http_error',
  // A success answer whose body is not what the contract says (not JSON, say).
  'invalid_response',
  // An argument the client refuses before sending anything (an empty path segment, a key of
  // the wrong length).
  'invalid_argument',
  // A log verifier key that does not parse, or whose hash does not match its key.
  'invalid_log_key',
  // A checkpoint that is not a signed note, not signed by the log key, or not a checkpoint.
  'checkpoint_invalid',
  // A proof that does not hold, does not match the checkpoints, or does not parse.
  'proof_invalid',
] as const;

/** A code of a failure the client detects itself. */
export type ClientErrorCode = (typeof CLIENT_ERROR_CODES)[number];

/**
 * Any error code: the contract's, the client's, or one a newer server answers that this
 * client does not know yet (hence `string`).
 */
export type ErrorCode = ApiErrorCode | ClientErrorCode | (string & {});

/** The failure of a call or a check. */
export class ShardkeeperError extends Error {
  /** The HTTP status of the answer; 0 when there was none (network error, timeout, abort, a local check). */
  readonly status: number;
  /** The contract's error code (`nonce_used`, …) or the client's (`network_error`, …). */
  readonly code: ErrorCode;
  /** The answer's Retry-After in milliseconds (429 and 503 carry one); 0 when absent. */
  readonly retryAfterMs: number;

  constructor(init: { status: number; code: ErrorCode; message: string; retryAfterMs?: number; cause?: unknown }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'ShardkeeperError';
    this.status = init.status;
    this.code = init.code;
    this.retryAfterMs = init.retryAfterMs ?? 0;
  }
}

/** Whether err is a ShardkeeperError, optionally with one of the given codes. */
export function isShardkeeperError(err: unknown, ...codes: ErrorCode[]): err is ShardkeeperError {
  return err instanceof ShardkeeperError && (codes.length === 0 || codes.includes(err.code));
}

/** A failure the client detects before or without sending anything. */
export function clientError(code: ClientErrorCode, message: string, cause?: unknown): ShardkeeperError {
  return new ShardkeeperError({ status: 0, code, message, cause });
}
