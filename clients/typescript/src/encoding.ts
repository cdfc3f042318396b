// Byte encodings the API uses: base64 (keys, signatures, proof hashes, delegate actions),
// base58 (NEAR keys and hashes) and UTF-8. Written here rather than with atob/btoa because
// those are lenient in ways the server is not (atob takes unpadded input and ignores spaces),
// and a proof check must refuse what Go refuses.

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64_URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** Standard base64 with padding (RFC 4648 §4), as the server writes it. */
export function toBase64(bytes: Uint8Array): string {
  return encode64(bytes, B64, true);
}

/** URL-safe base64 without padding (RFC 4648 §5): the identifier alphabet of request ids. */
export function toBase64Url(bytes: Uint8Array): string {
  return encode64(bytes, B64_URL, false);
}

function encode64(bytes: Uint8Array, alphabet: string, pad: boolean): string {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]! + alphabet[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + (pad ? '==' : '');
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]! + (pad ? '=' : '');
  }
  return out;
}

const DECODE_STD = decodeTable(B64);

function decodeTable(alphabet: string): Int16Array {
  const t = new Int16Array(128).fill(-1);
  for (let i = 0; i < alphabet.length; i++) t[alphabet.charCodeAt(i)] = i;
  return t;
}

/**
 * Decodes standard, padded base64 as Go's base64.StdEncoding does: the length must be a
 * multiple of 4 with '=' padding, CR and LF are skipped, anything else outside the alphabet is
 * an error. Returns undefined for input that is not base64.
 */
export function fromBase64Std(s: string): Uint8Array | undefined {
  const clean = s.replace(/[\r\n]/g, '');
  if (clean.length % 4 !== 0) return undefined;
  const padding = clean.endsWith('==') ? 2 : clean.endsWith('=') ? 1 : 0;
  const out = new Uint8Array((clean.length / 4) * 3 - padding);
  let o = 0;
  for (let i = 0; i < clean.length; i += 4) {
    let n = 0;
    for (let j = 0; j < 4; j++) {
      const c = clean.charCodeAt(i + j);
      const last = i + 4 === clean.length;
      if (c === 61 /* = */ && last && j >= 4 - padding) {
        n <<= 6;
        continue;
      }
      const v = c < 128 ? DECODE_STD[c]! : -1;
      if (v < 0) return undefined;
      n = (n << 6) | v;
    }
    out[o++] = (n >> 16) & 255;
    if (o < out.length) out[o++] = (n >> 8) & 255;
    if (o < out.length) out[o++] = n & 255;
  }
  return out;
}

/**
 * Decodes base64 in any of the four forms the server takes for keys and signatures (standard
 * or URL-safe alphabet, with or without padding). Returns undefined for anything else.
 */
export function fromBase64Any(s: string): Uint8Array | undefined {
  const std = s.replace(/-/g, '+').replace(/_/g, '/');
  const unpadded = std.replace(/=+$/, '');
  if (unpadded.length % 4 === 1) return undefined;
  return fromBase64Std(unpadded + '='.repeat((4 - (unpadded.length % 4)) % 4));
}

const B58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** Bitcoin-alphabet base58, as NEAR writes keys, signatures and hashes. */
export function toBase58(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  const digits: number[] = [];
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i]!;
    for (let j = 0; j < digits.length; j++) {
      carry += digits[j]! << 8;
      digits[j] = carry % 58;
      carry = (carry / 58) | 0;
    }
    while (carry > 0) {
      digits.push(carry % 58);
      carry = (carry / 58) | 0;
    }
  }
  return '1'.repeat(zeros) + digits.reverse().map((d) => B58[d]).join('');
}

/** Decodes base58 (Bitcoin alphabet); undefined when s is not base58. */
export function fromBase58(s: string): Uint8Array | undefined {
  let zeros = 0;
  while (zeros < s.length && s[zeros] === '1') zeros++;
  const bytes: number[] = [];
  for (let i = zeros; i < s.length; i++) {
    let carry = B58.indexOf(s[i]!);
    if (carry < 0) return undefined;
    for (let j = 0; j < bytes.length; j++) {
      carry += bytes[j]! * 58;
      bytes[j] = carry & 255;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.push(carry & 255);
      carry >>= 8;
    }
  }
  return new Uint8Array([...new Array<number>(zeros).fill(0), ...bytes.reverse()]);
}

const encoder = new TextEncoder();

/** The UTF-8 bytes of s. */
export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

/** Lower-case hexadecimal. */
export function toHex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += b.toString(16).padStart(2, '0');
  return out;
}

/** Whether two byte strings are equal. */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** a and b, one after the other. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Random bytes from the platform's CSPRNG (Web Crypto). */
export function randomBytes(n: number): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(n));
}

/**
 * The Web Crypto algorithm of Ed25519, in the object form every runtime takes (some older
 * ones reject the bare string).
 */
export const ED25519 = { name: 'Ed25519' } as const;

/**
 * A fresh ArrayBuffer copy of bytes: Web Crypto's typings (and some runtimes) want a plain
 * ArrayBuffer, not a view over a possibly shared or larger one.
 */
export function buffer(bytes: Uint8Array): ArrayBuffer {
  const b = new ArrayBuffer(bytes.length);
  new Uint8Array(b).set(bytes);
  return b;
}
