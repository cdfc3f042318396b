// The life of one call: its deadline (timeoutMs) and the caller's AbortSignal, joined into
// the one signal every attempt and every wait between attempts listens to, so that either
// ends the whole call at once — and the error says which (timeout or aborted).
//
// AbortSignal.any and AbortSignal.timeout would do most of this, but not on every runtime the
// client supports, and neither says which of several signals fired.

import { ShardkeeperError } from './errors.js';

/** The longest delay setTimeout honours. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class CallScope {
  readonly signal: AbortSignal;
  /** When the call must end (ms since the epoch); Infinity without a deadline. */
  readonly deadline: number;
  private readonly ctl = new AbortController();
  private why: 'timeout' | 'aborted' | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly user: AbortSignal | undefined;
  private readonly onUserAbort = (): void => this.end('aborted');

  constructor(timeoutMs: number | undefined, user: AbortSignal | undefined, now = Date.now()) {
    this.signal = this.ctl.signal;
    this.user = user;
    this.deadline = timeoutMs !== undefined && timeoutMs > 0 && Number.isFinite(timeoutMs) ? now + timeoutMs : Infinity;
    if (user?.aborted) {
      this.end('aborted');
      return;
    }
    user?.addEventListener('abort', this.onUserAbort, { once: true });
    // setTimeout fires at once past 2^31-1 ms: a longer deadline is as good as none.
    if (this.deadline !== Infinity && this.deadline - now <= MAX_TIMER_MS) this.timer = setTimeout(() => this.end('timeout'), this.deadline - now);
  }

  private end(why: 'timeout' | 'aborted'): void {
    if (this.why) return;
    this.why = why;
    this.ctl.abort(this.error());
  }

  /** Whether the call has ended (deadline passed or caller aborted). */
  get ended(): boolean {
    return this.why !== undefined;
  }

  /** Whether the caller aborted the call (as opposed to its deadline passing). */
  get aborted(): boolean {
    return this.why === 'aborted';
  }

  /** The error that ends the call: timeout or aborted. */
  error(cause?: unknown): ShardkeeperError {
    if (this.why === 'aborted') {
      return new ShardkeeperError({ status: 0, code: 'aborted', message: 'shardkeeper: the call was aborted', cause: cause ?? this.user?.reason });
    }
    return new ShardkeeperError({ status: 0, code: 'timeout', message: 'shardkeeper: the call timed out', cause });
  }

  /** Stops the deadline's timer and lets go of the caller's signal. */
  dispose(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.user?.removeEventListener('abort', this.onUserAbort);
  }

  /** Waits ms, or rejects with the call's error as soon as it ends. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.ended) return reject(this.error());
      const onAbort = (): void => {
        clearTimeout(t);
        reject(this.error());
      };
      const t = setTimeout(() => {
        this.signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      this.signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}
