// The byte encodings, against Node's own (Buffer): base64 in both alphabets, the strict
// decoding Go does, and base58.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { fromBase58, fromBase64Any, fromBase64Std, toBase58, toBase64, toBase64Url } from '../../src/encoding.js';

test('base64 round trips and matches Buffer', () => {
  for (let n = 0; n < 70; n++) {
    const b = new Uint8Array(randomBytes(n));
    assert.equal(toBase64(b), Buffer.from(b).toString('base64'));
    assert.equal(toBase64Url(b), Buffer.from(b).toString('base64url'));
    assert.deepEqual(fromBase64Std(toBase64(b)), b);
    assert.deepEqual(fromBase64Any(toBase64Url(b)), b);
    assert.deepEqual(fromBase64Any(toBase64(b).replace(/=+$/, '')), b);
  }
});

test('standard base64 is decoded as strictly as Go: padding required, nothing outside the alphabet', () => {
  assert.deepEqual(fromBase64Std('YQ=='), Uint8Array.from([97]));
  assert.deepEqual(fromBase64Std('YQ==\r\n'), Uint8Array.from([97]), 'CR and LF are skipped');
  for (const bad of ['YQ', 'YQ=', 'Y===', '====', 'YQ=a', 'Y Q==', 'YQ-_', 'é===']) assert.equal(fromBase64Std(bad), undefined, bad);
  assert.equal(fromBase64Any('Y'), undefined);
});

test('base58 round trips, leading zeros included', () => {
  for (const b of [new Uint8Array([]), new Uint8Array([0, 0, 1]), new Uint8Array(randomBytes(32)), new Uint8Array(randomBytes(64))]) {
    assert.deepEqual(fromBase58(toBase58(b)), b);
  }
  assert.equal(toBase58(new Uint8Array([0, 0, 0])), '111');
  assert.equal(fromBase58('0OIl'), undefined);
});
