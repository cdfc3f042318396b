// Child processes of the tests (the node, the fakes): started with their output in a log file,
// stopped by their own pid, and killed when the test process exits whatever happened.

import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:net';

const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of running) {
    try {
      c.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** A started process. */
export class Child {
  readonly exited: Promise<number | null>;
  private stdoutBuf = '';
  private readonly lineWaiters: Array<(line: string) => void> = [];
  private lines: string[] = [];

  constructor(
    readonly name: string,
    readonly proc: ChildProcess,
    readonly logPath: string,
  ) {
    running.add(proc);
    this.exited = new Promise((resolve) => {
      proc.once('exit', (code) => {
        running.delete(proc);
        resolve(code);
      });
      proc.once('error', () => {
        running.delete(proc);
        resolve(null);
      });
    });
    proc.stdout?.setEncoding('utf8').on('data', (s: string) => {
      this.stdoutBuf += s;
      let nl: number;
      while ((nl = this.stdoutBuf.indexOf('\n')) >= 0) {
        const line = this.stdoutBuf.slice(0, nl);
        this.stdoutBuf = this.stdoutBuf.slice(nl + 1);
        const w = this.lineWaiters.shift();
        if (w) w(line);
        else this.lines.push(line);
      }
    });
  }

  /** The next line the process writes to stdout; fails if it exits or timeoutMs passes first. */
  nextLine(timeoutMs = 30_000): Promise<string> {
    const queued = this.lines.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.name}: no output within ${timeoutMs} ms (log: ${this.logPath})`)), timeoutMs);
      this.lineWaiters.push((line) => {
        clearTimeout(t);
        resolve(line);
      });
      void this.exited.then((code) => {
        clearTimeout(t);
        reject(new Error(`${this.name} exited (${code}) before writing a line (log: ${this.logPath})`));
      });
    });
  }

  /** Whether the process still runs. */
  get alive(): boolean {
    return running.has(this.proc);
  }

  /** SIGTERM, then SIGKILL after graceMs; resolves once the process is gone. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.alive) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(t);
  }
}

/** Starts cmd with args; stderr (and stdout past what the caller reads) go to logPath. */
export function start(name: string, cmd: string, args: string[], opts: { cwd: string; logPath: string; env?: NodeJS.ProcessEnv }): Child {
  const log = createWriteStream(opts.logPath, { flags: 'a' });
  const proc = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stderr?.pipe(log);
  proc.stdout?.on('data', (b: Buffer) => log.write(b));
  return new Child(name, proc, opts.logPath);
}

/** A TCP port free on 127.0.0.1 right now (another process may take it before it is used). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * Waits until cond() holds, asking every intervalMs: the tests wait for conditions, never for
 * a fixed time. Fails naming what was awaited when timeoutMs passes.
 */
export async function waitFor(what: string, cond: () => Promise<boolean> | boolean, opts: { timeoutMs?: number; intervalMs?: number } = {}): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let last: unknown;
  for (;;) {
    try {
      if (await cond()) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out waiting for ${what}${last ? `: ${last instanceof Error ? last.message : String(last)}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 50));
  }
}
