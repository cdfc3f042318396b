// Starts a stack (shardkeeper with the fake NEAR and Arweave nodes) and keeps it up until
// SIGINT or SIGTERM: for running code against it by hand or from another test runner.
//
//   npm run stack            # prints the StackInfo as one JSON line, then waits
//
// The JSON is what SHARDKEEPER_TEST_STACK carries: set that variable to it and useStack()
// in another process uses this stack instead of starting one.

import { stackInfo, startStack } from './stack.js';

const stack = await startStack();
process.stdout.write(JSON.stringify(stackInfo(stack)) + '\n');
const stop = async (): Promise<void> => {
  await stack.stop();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
// Keep the process alive until a signal comes.
setInterval(() => {}, 1 << 30);
