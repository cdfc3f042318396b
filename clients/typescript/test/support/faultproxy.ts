// A proxy in front of a real node that injects faults and records what passed: how the retry
// tests count the requests the node received, and show that a request the contract does not
// make repeatable is never sent twice.

import { type IncomingMessage, type ServerResponse, type Server, createServer, request } from 'node:http';

/** A fault for one request. */
export type Fault =
  /** The proxy answers this status itself, with the contract's error body: the node never sees the request. */
  | { kind: 'status'; status: number; code?: string; retryAfter?: number }
  /** The connection is closed before the request reaches the node: it never ran, but the client cannot know. */
  | { kind: 'drop' }
  /** The request reaches the node and runs; its answer is lost (the connection is closed). */
  | { kind: 'drop-answer' };

/** A request as the proxy saw it. */
export interface Seen {
  method: string;
  /** The path without the query. */
  path: string;
  query: string;
  body: string;
  /** Whether it was passed to the node (which then ran it). */
  forwarded: boolean;
  fault?: Fault['kind'];
}

interface Rule {
  method: string | undefined;
  path: RegExp | string;
  faults: Fault[];
}

export class FaultProxy {
  /** Every request that reached the proxy, in order. */
  readonly seen: Seen[] = [];
  private readonly rules: Rule[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
    private readonly target: URL,
  ) {}

  /** A proxy on a free loopback port in front of target (a node's URL). */
  static start(target: string): Promise<FaultProxy> {
    return new Promise((resolve, reject) => {
      let proxy: FaultProxy | undefined;
      const server = createServer((req, res) => void proxy!.handle(req, res));
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const a = server.address();
        if (!a || typeof a !== 'object') return reject(new Error('fault proxy: no address'));
        proxy = new FaultProxy(server, `http://127.0.0.1:${a.port}`, new URL(target));
        resolve(proxy);
      });
    });
  }

  /**
   * The next requests matching method and path (a path prefix, or a pattern) get faults, one
   * each, in order; after them, such requests pass.
   */
  inject(match: { method?: string; path: RegExp | string }, ...faults: Fault[]): void {
    this.rules.push({ method: match.method, path: match.path, faults: [...faults] });
  }

  /** The requests the node received (forwarded), optionally only those matching. */
  received(match: { method?: string; path?: RegExp | string } = {}): Seen[] {
    return this.seen.filter((s) => s.forwarded && matches(match.method, match.path, s.method, s.path));
  }

  /** Every request that reached the proxy, optionally only those matching. */
  requests(match: { method?: string; path?: RegExp | string } = {}): Seen[] {
    return this.seen.filter((s) => matches(match.method, match.path, s.method, s.path));
  }

  /** Stops the proxy and closes its connections. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const [path = '', query = ''] = (req.url ?? '').split('?');
    const seen: Seen = { method: req.method ?? 'GET', path, query, body: body.toString('utf8'), forwarded: false };
    this.seen.push(seen);
    const rule = this.rules.find((r) => r.faults.length > 0 && matches(r.method, r.path, seen.method, path));
    const fault = rule?.faults.shift();
    if (fault) seen.fault = fault.kind;
    if (fault?.kind === 'status') {
      const headers: Record<string, string> = { 'Content-Type': 'application/json' };
      if (fault.retryAfter !== undefined) headers['Retry-After'] = String(fault.retryAfter);
      res.writeHead(fault.status, headers);
      res.end(JSON.stringify({ error: fault.code ?? 'unavailable', message: 'injected by the test proxy' }));
      return;
    }
    if (fault?.kind === 'drop') {
      req.socket.destroy();
      return;
    }
    seen.forwarded = true;
    const upstream = request(
      {
        host: this.target.hostname,
        port: this.target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: this.target.host, connection: 'close' },
      },
      (up) => {
        if (fault?.kind === 'drop-answer') {
          // Let the node finish the request, then lose its answer.
          up.resume();
          up.on('end', () => req.socket.destroy());
          return;
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => req.socket.destroy());
    upstream.end(body);
  }
}

function matches(ruleMethod: string | undefined, rulePath: RegExp | string | undefined, method: string, path: string): boolean {
  if (ruleMethod && ruleMethod !== method) return false;
  if (rulePath === undefined) return true;
  return typeof rulePath === 'string' ? path.startsWith(rulePath) : rulePath.test(path);
}
