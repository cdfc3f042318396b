// NEAR Ed25519 keys made from fixed seeds, with Web Crypto: the relayer's access key and the
// users who sign delegate actions, the same on every run.

import { createHash } from 'node:crypto';
import { toBase58 } from '../../src/encoding.js';

/** A NEAR key pair. */
export interface NearKey {
  /** "ed25519:<base58 of the 32-byte public key>". */
  publicKey: string;
  /** "ed25519:<base58 of seed ‖ public key>", NEAR's secret key form (keys files, near-api-js). */
  secretKey: string;
  /** The Web Crypto private key, for signing delegate actions. */
  privateKey: CryptoKey;
}

// PKCS #8 of an Ed25519 private key: this prefix, then the 32-byte seed.
const PKCS8_PREFIX = Uint8Array.from([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]);

/** The key pair whose seed is SHA-256 of label. */
export async function nearKey(label: string): Promise<NearKey> {
  const seed = createHash('sha256').update(`shardkeeper client test key ${label}`).digest();
  const pkcs8 = new Uint8Array([...PKCS8_PREFIX, ...seed]);
  const privateKey = await crypto.subtle.importKey('pkcs8', pkcs8, { name: 'Ed25519' }, true, ['sign']);
  const jwk = await crypto.subtle.exportKey('jwk', privateKey);
  const pub = Buffer.from(jwk.x!, 'base64url');
  return {
    publicKey: `ed25519:${toBase58(pub)}`,
    secretKey: `ed25519:${toBase58(new Uint8Array([...seed, ...pub]))}`,
    privateKey,
  };
}
