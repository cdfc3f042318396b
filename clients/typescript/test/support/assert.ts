// Assertions the tests share.

import assert from 'node:assert/strict';
import { isShardkeeperError } from '../../src/errors.js';

/** For assert.rejects: the call failed with a ShardkeeperError of this status and code. */
export const refusedWith = (status: number, code: string) => (err: unknown) => {
  assert.ok(isShardkeeperError(err), String(err));
  assert.deepEqual([err.status, err.code], [status, code], err.message);
  return true;
};
