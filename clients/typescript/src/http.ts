// One logical API call: the attempts, the choice of node for each, the retries between them,
// and the conversion of every way it can fail into a ShardkeeperError. Only global fetch,
// AbortController and timers are used, so it runs on Node, Workers, Deno and browsers alike.

import { ShardkeeperError, clientError } from './errors.js';
import { type AttemptFailure, type RetryPolicy, isUnsent, parseRetryAfter, retryable, retryWaitMs } from './retry.js';
import { type Actor, type Forwarded, type Routes, Issuers, ROUTES, RoutingTable, forwardedOf } from './routing.js';
import { decode } from './wire.js';
import { CallScope } from './scope.js';

/** A fetch function: the global one by default (Workers: pass it bound if it is a method). */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** The bearer tokens of the API, each sent on its own endpoints only. */
export type TokenKind = 'admin' | 'relayer' | 'chain' | 'servers';

/** Options of any one call. */
export interface CallOptions {
  /** Cancels the call: it then fails with code `aborted`. */
  signal?: AbortSignal;
  /** The deadline of the whole call, retries included (default: the client's timeoutMs); past it the call fails with code `timeout`. */
  timeoutMs?: number;
}

/** One logical call. */
export interface CallSpec {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Escaped path with its query, starting with "/". */
  path: string;
  /** Sent as JSON when defined. */
  body?: unknown;
  auth?: TokenKind;
  /** May be sent again after a network failure (see retry.ts). */
  idempotent?: boolean;
  /** One attempt whatever the policy. */
  single?: boolean;
  /** The answer is text (a checkpoint), not JSON. */
  text?: boolean;
  /** A long poll the server may hold this long: added to the call's deadline. */
  holdMs?: number;
  /** The base URL the first attempt goes to (the node that issued a nonce). */
  prefer?: string;
  /** The actor the call runs on: with routing, the first attempt goes to its leader. */
  actor?: Actor | undefined;
  /** The call may run on any actor of its kind (issuing a nonce): with routing, it goes to a leader. */
  anyLeader?: boolean;
}

/** A success answer. */
export interface Answer {
  status: number;
  /** The JSON body (undefined when empty), or the text with CallSpec.text. */
  data: unknown;
  /** The base URL that answered. */
  base: string;
}

/** What the transport is built from (ShardkeeperOptions, resolved). */
export interface TransportConfig {
  bases: string[];
  tokens: Partial<Record<TokenKind, string>>;
  fetch: FetchLike;
  timeoutMs: number;
  retry: RetryPolicy;
  routing: boolean;
  /** Seams for tests. */
  random?: () => number;
  now?: () => number;
}

/** The client's transport: every call of every domain goes through `call`. */
export class Transport {
  readonly bases: string[];
  readonly issuers = new Issuers();
  readonly routes: RoutingTable | undefined;
  private readonly cfg: TransportConfig;
  private next = 0;
  private readonly random: () => number;
  private readonly now: () => number;

  /** Whether the client was given a token of this kind. */
  hasToken(kind: TokenKind): boolean {
    return Boolean(this.cfg.tokens[kind]);
  }

  constructor(cfg: TransportConfig) {
    this.cfg = cfg;
    this.bases = cfg.bases;
    this.routes = cfg.routing ? new RoutingTable() : undefined;
    this.random = cfg.random ?? Math.random;
    this.now = cfg.now ?? Date.now;
  }

  /** Runs spec with retries; resolves with the success answer or rejects with a ShardkeeperError. */
  async call(spec: CallSpec, opts: CallOptions = {}): Promise<Answer> {
    const timeout = opts.timeoutMs ?? this.cfg.timeoutMs;
    const scope = new CallScope(timeout > 0 ? timeout + (spec.holdMs ?? 0) : undefined, opts.signal, this.now());
    try {
      return await this.attempts(spec, scope);
    } finally {
      scope.dispose();
    }
  }

  private async attempts(spec: CallSpec, scope: CallScope): Promise<Answer> {
    let body: string | undefined;
    try {
      body = spec.body === undefined ? undefined : JSON.stringify(spec.body);
    } catch (err) {
      // A bigint or a cycle in a manifest or meta, say: JSON cannot carry it.
      throw clientError('invalid_argument', `shardkeeper: ${spec.method} ${spec.path}: the body is not JSON: ${String(err)}`, err);
    }
    const attempts = spec.single ? 1 : this.cfg.retry.retries + 1;
    for (let n = 1; ; n++) {
      if (scope.ended) throw scope.error();
      let base = spec.prefer ?? '';
      let routed = false;
      if (n === 1) {
        const r = this.routed(spec);
        if (r) [base, routed] = [r, true];
      }
      if (n > 1 || !base) base = this.bases[this.next++ % this.bases.length]!;
      const out = await this.once(base, spec, body, scope);
      if (this.routes && spec.actor && out.forwarded.addr) {
        // Forwarded: the answer names the leader. Take it, and refresh the rest.
        this.routes.learn(spec.actor, out.forwarded, this.scheme());
        this.refreshSoon();
      } else if (this.routes && routed && 'failure' in out && out.failure.network) {
        this.routes.forget(base);
        this.refreshSoon();
      }
      if ('answer' in out) return out.answer;
      const { failure } = out;
      // The caller's abort ends the call as aborted (the last error its cause); the deadline with
      // the last error, as a wait that would end past it is not started.
      const end = (): ShardkeeperError =>
        scope.aborted && failure.error.code !== 'aborted' ? scope.error(failure.error) : failure.error;
      if (n >= attempts || scope.ended || !retryable(failure, spec.idempotent ?? false)) throw end();
      const wait = retryWaitMs(this.cfg.retry, n, failure.error, this.random(), this.random());
      if (this.now() + wait >= scope.deadline) throw end();
      await scope.sleep(wait).catch(() => {
        throw end();
      });
    }
  }

  /** The base URL routing sends spec to first, "" for none. */
  private routed(spec: CallSpec): string {
    if (!this.routes || (!spec.actor && !spec.anyLeader)) return '';
    const base = spec.actor ? this.routes.base(spec.actor) : this.routes.anyLeader();
    if (!base) this.refreshSoon();
    return base;
  }

  /** One attempt of spec at base. */
  private async once(
    base: string,
    spec: CallSpec,
    body: string | undefined,
    scope: CallScope,
  ): Promise<{ answer: Answer; forwarded: Forwarded } | { failure: AttemptFailure; forwarded: Forwarded }> {
    const none: Forwarded = { addr: '', partition: -1 };
    const headers: Record<string, string> = { Accept: spec.text ? 'text/plain, application/json' : 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const token = spec.auth ? this.cfg.tokens[spec.auth] : undefined;
    if (token) headers['Authorization'] = `Bearer ${token}`;
    const label = `${spec.method} ${spec.path.split('?')[0]}`;
    let res: Response;
    try {
      const f = this.cfg.fetch;
      res = await f(base + spec.path, { method: spec.method, headers, body: body ?? null, signal: scope.signal });
    } catch (err) {
      return { failure: networkFailure(err, scope, label, isUnsent(err)), forwarded: none };
    }
    const forwarded = forwardedOf(res.headers);
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      return { failure: networkFailure(err, scope, label, false), forwarded };
    }
    if (res.status < 200 || res.status > 299) {
      return { failure: { error: this.errorOf(res, text), network: false, unsent: false }, forwarded };
    }
    if (spec.text) return { answer: { status: res.status, data: text, base }, forwarded };
    if (text === '') return { answer: { status: res.status, data: undefined, base }, forwarded };
    try {
      return { answer: { status: res.status, data: JSON.parse(text), base }, forwarded };
    } catch (err) {
      const error = new ShardkeeperError({
        status: res.status,
        code: 'invalid_response',
        message: `shardkeeper: ${label}: HTTP ${res.status} answer is not JSON`,
        cause: err,
      });
      return { failure: { error, network: false, unsent: false }, forwarded };
    }
  }

  /** The error of a non-2xx answer: the contract's {error, message} body, or the start of whatever came. */
  private errorOf(res: Response, text: string): ShardkeeperError {
    const retryAfterMs = parseRetryAfter(res.headers.get('Retry-After'), this.now());
    try {
      const b = JSON.parse(text) as { error?: unknown; message?: unknown };
      if (b && typeof b.error === 'string' && b.error !== '') {
        return new ShardkeeperError({ status: res.status, code: b.error, message: typeof b.message === 'string' ? b.message : '', retryAfterMs });
      }
    } catch {
      // not the contract's body: below
    }
    let message = text.trim();
    if (message.length > 200) message = message.slice(0, 200) + '…';
    return new ShardkeeperError({ status: res.status, code: 'http_error', message: message || res.statusText || `HTTP ${res.status}`, retryAfterMs });
  }

  /** Fetches the routing table now (with routing on). */
  async refreshRoutes(opts: CallOptions = {}): Promise<Routes> {
    const a = await this.call({ method: 'GET', path: '/v1/cluster/routes', idempotent: true }, opts);
    const rt = routesOf(a.data);
    this.routes?.set(rt, this.scheme());
    return rt;
  }

  /** Fetches the table in the background when a fetch is due. */
  private refreshSoon(): void {
    const routes = this.routes;
    if (!routes || !routes.due(this.now())) return;
    this.refreshRoutes({ timeoutMs: 5000 })
      .catch(() => {
        // A failed refresh keeps the table as it is; the next stale answer asks again.
      })
      .finally(() => {
        routes.refreshing = false;
      });
  }

  /** The scheme of the base URLs, which the nodes' advertised addresses are reached with too. */
  private scheme(): string {
    return this.bases[0]!.startsWith('https:') ? 'https' : 'http';
  }
}

/** The failure of an attempt that got no answer. */
function networkFailure(err: unknown, scope: CallScope, label: string, unsent: boolean): AttemptFailure {
  if (scope.ended) return { error: scope.error(err), network: true, unsent: false };
  const why = err instanceof Error ? err.message : String(err);
  const error = new ShardkeeperError({ status: 0, code: 'network_error', message: `shardkeeper: ${label}: ${why}`, cause: err });
  return { error, network: true, unsent };
}

/** The routing table of an answer (wire form). */
export function routesOf(data: unknown): Routes {
  const rt = decode<Routes>(ROUTES, data ?? {});
  return { epoch: rt.epoch ?? 0, partitions: rt.partitions ?? 0, groups: rt.groups ?? [] };
}
