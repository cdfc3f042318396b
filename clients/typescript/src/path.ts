import { clientError } from './errors.js';

/**
 * One escaped path segment. An empty segment, "." or ".." is refused before anything is sent:
 * the server's router would clean it away and answer for another resource.
 */
export function seg(s: string, what: string): string {
  if (typeof s !== 'string' || s === '' || s === '.' || s === '..') {
    throw clientError('invalid_argument', `shardkeeper: ${JSON.stringify(s)} cannot be ${what}`);
  }
  return encodeURIComponent(s);
}

/** A positive integer for a path or query (a seq, a version, a tree size). */
export function positive(n: number, what: string): string {
  if (!Number.isSafeInteger(n) || n < 1) throw clientError('invalid_argument', `shardkeeper: ${what} must be an integer ≥ 1, not ${n}`);
  return String(n);
}
