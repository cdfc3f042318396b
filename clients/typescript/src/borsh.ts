// The little of borsh that a NEP-366 SignedDelegateAction needs: integers little-endian,
// strings and byte vectors with a u32 length, enums as a u8 tag. Enough to hand the relayer a
// user's signed delegate action without depending on near-api-js.

import { utf8 } from './encoding.js';
import { clientError } from './errors.js';

export class BorshWriter {
  private buf = new Uint8Array(256);
  private len = 0;

  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.len + n));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  u8(v: number): this {
    this.room(1);
    this.buf[this.len++] = v & 255;
    return this;
  }

  u32(v: number): this {
    return this.uint(BigInt(v), 4, 'u32');
  }

  u64(v: bigint): this {
    return this.uint(v, 8, 'u64');
  }

  u128(v: bigint): this {
    return this.uint(v, 16, 'u128');
  }

  private uint(v: bigint, bytes: number, what: string): this {
    if (v < 0n || v >= 1n << BigInt(bytes * 8)) throw clientError('invalid_argument', `shardkeeper: ${v} does not fit a ${what}`);
    this.room(bytes);
    for (let i = 0; i < bytes; i++) {
      this.buf[this.len++] = Number(v & 255n);
      v >>= 8n;
    }
    return this;
  }

  /** Fixed-size bytes, no length. */
  raw(b: Uint8Array): this {
    this.room(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
    return this;
  }

  /** A Vec<u8>: u32 length, then the bytes. */
  bytes(b: Uint8Array): this {
    return this.u32(b.length).raw(b);
  }

  /** A String: its UTF-8 bytes as a Vec<u8>. */
  string(s: string): this {
    return this.bytes(utf8(s));
  }

  /** What was written. */
  done(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}
