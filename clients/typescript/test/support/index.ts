// Test support, for this package's tests and for code built on it (the examples): start the
// repository's shardkeeper node with the fake NEAR and Arweave nodes behind it, put a
// fault-injecting proxy in front of it, and wait for conditions.

export { startStack, useStack, stackInfo, userKey, clientOptions, unique, STACK_ENV, type Stack, type StackInfo } from './stack.js';
export { startShardkeeper, type Node, type NodeOptions } from './shardkeeper.js';
export { startFakeNear, startFakeArweave, nearLedger, type FakeNear, type FakeArweave, type FakeAccount, type LedgerEntry } from './fakes.js';
export { FaultProxy, type Fault, type Seen } from './faultproxy.js';
export { nearKey, type NearKey } from './nearkeys.js';
export { waitFor, freePort, start, Child } from './process.js';
export { repoRoot, packageRoot, shardkeeperBinary, goBinary } from './paths.js';
