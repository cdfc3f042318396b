// The nonce oracle: single-use nonces for replay protection, issued to an organisation and
// accepted at most once.

import { randomBytes, toBase64Url } from './encoding.js';
import type { CallOptions, Transport } from './http.js';
import { seg } from './path.js';
import { nonceActor } from './routing.js';
import { decode, encode, shape } from './wire.js';

/** An oracle nonce: the answer of issue (usedAt null) and get. Times are Unix ms. */
export interface Nonce {
  /** Opaque: do not parse it. */
  nonce: string;
  orgId: string;
  issuedAt: number;
  expiresAt: number;
  /** null while unused. */
  usedAt: number | null;
}

/** The answer of a consume. */
export interface Consumed {
  nonce: string;
  usedAt: number;
}

/** The body of a consume. */
export interface ConsumeRequest {
  orgId: string;
  /**
   * Names this logical attempt so that repeating it is safe: a consume repeated with the
   * request id that consumed the nonce is answered 200 again, with the first usedAt. The client
   * generates one when it is absent, the same on every attempt of the call; pass your own to
   * make retries across calls or processes safe too. At most 128 bytes.
   */
  requestId?: string;
}

/** The body of an issue. */
export interface IssueRequest {
  orgId: string;
}

export const NONCE = shape<Nonce>()({
  nonce: 'nonce',
  org_id: 'orgId',
  issued_at: 'issuedAt',
  expires_at: 'expiresAt',
  used_at: 'usedAt',
});
export const CONSUMED = shape<Consumed>()({ nonce: 'nonce', used_at: 'usedAt' });
export const ISSUE_REQUEST = shape<IssueRequest>()({ org_id: 'orgId' });
export const CONSUME_REQUEST = shape<ConsumeRequest>()({ org_id: 'orgId', request_id: 'requestId' });

/** A fresh request id: 128 random bits in the identifier alphabet [A-Za-z0-9_-]. */
export function newRequestId(): string {
  return toBase64Url(randomBytes(16));
}

/** `sk.nonces`: issue, consume and read oracle nonces. */
export class Nonces {
  constructor(private readonly t: Transport) {}

  /**
   * Issues a nonce to an organisation (201). Not repeatable: after a network failure that may
   * have reached the server the call fails rather than issue a second nonce (a lost one just
   * expires). 429 `too_many_outstanding` and 503 are retried after their Retry-After.
   */
  async issue(orgId: string, opts?: CallOptions): Promise<Nonce> {
    const a = await this.t.call(
      { method: 'POST', path: '/v1/nonces', body: encode(ISSUE_REQUEST, { orgId }), anyLeader: true },
      opts,
    );
    // A new nonce's answer has no used_at: it is unused.
    const d = decode<Nonce>(NONCE, a.data);
    const n: Nonce = { ...d, usedAt: d.usedAt ?? null };
    if (this.t.bases.length > 1) this.t.issuers.remember(n.nonce, a.base);
    return n;
  }

  /**
   * Consumes a nonce: it is accepted at most once. Fails with `nonce_used` (409) when it was
   * consumed before (by another request id), `nonce_expired` (410), `org_mismatch` (403) or
   * `unknown_nonce` (404). With several URLs it goes first to the node that issued the nonce.
   */
  async consume(nonce: string, req: ConsumeRequest, opts?: CallOptions): Promise<Consumed> {
    const body = encode(CONSUME_REQUEST, { ...req, requestId: req.requestId || newRequestId() });
    const issuer = this.t.issuers.issuer(nonce);
    const a = await this.t.call(
      {
        method: 'POST',
        path: `/v1/nonces/${seg(nonce, 'a nonce')}/consume`,
        body,
        idempotent: true,
        actor: nonceActor(nonce),
        ...(issuer ? { prefer: issuer } : {}),
      },
      opts,
    );
    return decode<Consumed>(CONSUMED, a.data);
  }

  /** Reads a nonce (`unknown_nonce` when the server never issued it or forgot it). */
  async get(nonce: string, opts?: CallOptions): Promise<Nonce> {
    const a = await this.t.call(
      { method: 'GET', path: `/v1/nonces/${seg(nonce, 'a nonce')}`, idempotent: true, actor: nonceActor(nonce) },
      opts,
    );
    return decode<Nonce>(NONCE, a.data);
  }
}
