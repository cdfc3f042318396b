// The test runner of `npm test`: starts one stack (shardkeeper, fake NEAR, fake Arweave) for
// every test file, runs the files with node:test, and stops the stack. `--unit` runs the tests
// that need no server, without a stack.

import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { STACK_ENV, type Stack, stackInfo, startStack } from './support/stack.js';

const here = dirname(fileURLToPath(import.meta.url));
const unitOnly = process.argv.includes('--unit');
const testFiles = (folder: string): string[] =>
  readdirSync(join(here, folder))
    .filter((f) => f.endsWith('.test.js'))
    .sort()
    .map((f) => join(here, folder, f));

const files = [...testFiles('unit'), ...(unitOnly ? [] : testFiles('integration'))];
let stack: Stack | undefined;
const env = { ...process.env };
if (!unitOnly) {
  const t0 = Date.now();
  stack = await startStack();
  process.stderr.write(`stack up in ${Date.now() - t0} ms: shardkeeper at ${stack.url}, data and logs in ${stack.dir}\n`);
  env[STACK_ENV] = JSON.stringify(stackInfo(stack));
}
const code = await new Promise<number>((resolve) => {
  const child = spawn(process.execPath, ['--test', '--test-reporter=spec', ...files], { stdio: 'inherit', env });
  child.once('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0)));
});
if (stack) {
  await stack.stop({ keepFiles: code !== 0 });
  if (code !== 0) process.stderr.write(`tests failed: the logs are kept in ${stack.dir}\n`);
}
process.exit(code);
