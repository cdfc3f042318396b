// Ed25519 keys and signatures as the device registry takes them: raw 32-byte public keys and
// 64-byte signatures in base64. Web Crypto does the signing, so this runs wherever
// crypto.subtle has Ed25519 (Node ≥ 20, Workers, Deno, current browsers).

import { ED25519, buffer, fromBase64Any, toBase64, utf8 } from './encoding.js';
import { clientError } from './errors.js';

/** A public key: raw 32 bytes, their base64 (any alphabet, padded or not), or a Web Crypto Ed25519 public key. */
export type PublicKeyInput = Uint8Array | string | CryptoKey;

/** Bytes, or their base64 (any alphabet, padded or not). */
export type BytesInput = Uint8Array | string;

/** The base64 of a raw Ed25519 public key, checked to be 32 bytes. */
export async function publicKeyBase64(key: PublicKeyInput): Promise<string> {
  let raw: Uint8Array | undefined;
  if (typeof key === 'string') raw = fromBase64Any(key);
  else if (key instanceof Uint8Array) raw = key;
  else {
    try {
      raw = new Uint8Array(await crypto.subtle.exportKey('raw', key));
    } catch (err) {
      throw clientError('invalid_argument', 'shardkeeper: a public CryptoKey must be an extractable Ed25519 public key', err);
    }
  }
  if (!raw || raw.length !== 32) throw clientError('invalid_argument', 'shardkeeper: a public key is 32 bytes of Ed25519 (raw, or its base64)');
  return toBase64(raw);
}

/** The base64 of bytes given as bytes or base64, checked to be n bytes long. */
export function bytesBase64(b: BytesInput, n: number, what: string): string {
  const raw = typeof b === 'string' ? fromBase64Any(b) : b;
  if (!raw || raw.length !== n) throw clientError('invalid_argument', `shardkeeper: ${what} is ${n} bytes (raw, or their base64)`);
  return toBase64(raw);
}

/**
 * Signs a challenge nonce as verify (and a key rotation's proof) expects: Ed25519 over the
 * nonce's UTF-8 bytes, exactly as the challenge returned it.
 */
export async function signNonce(privateKey: CryptoKey, nonce: string): Promise<Uint8Array> {
  return signEd25519(privateKey, utf8(nonce));
}

/** An Ed25519 signature by privateKey; a key that cannot sign so is `invalid_argument`. */
export async function signEd25519(privateKey: CryptoKey, msg: Uint8Array): Promise<Uint8Array> {
  try {
    return new Uint8Array(await crypto.subtle.sign(ED25519, privateKey, buffer(msg)));
  } catch (err) {
    throw clientError('invalid_argument', 'shardkeeper: signing needs an Ed25519 private key with the sign usage', err);
  }
}

/** A new Ed25519 key pair (Web Crypto), extractable so that its public key can be registered. */
export async function generateDeviceKey(): Promise<CryptoKeyPair> {
  return (await crypto.subtle.generateKey(ED25519, true, ['sign', 'verify'])) as CryptoKeyPair;
}
