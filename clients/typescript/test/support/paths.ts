// Where the repository and its binaries are, and how to get the binaries when they are missing.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root: the first folder above this file that holds go.mod. */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'go.mod')) && existsSync(join(dir, 'clients'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error('test support: no go.mod above ' + fileURLToPath(import.meta.url));
    dir = up;
  }
}

/** The TypeScript package's folder (clients/typescript). */
export function packageRoot(): string {
  return join(repoRoot(), 'clients', 'typescript');
}

/**
 * The shardkeeper binary: $SHARDKEEPER_BIN, or the repository's bin/shardkeeper — built with
 * `make build` when it is missing.
 */
export function shardkeeperBinary(): string {
  const fromEnv = process.env['SHARDKEEPER_BIN'];
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new Error(`test support: SHARDKEEPER_BIN=${fromEnv} does not exist`);
    return resolve(fromEnv);
  }
  const root = repoRoot();
  const bin = join(root, 'bin', 'shardkeeper');
  if (existsSync(bin)) return bin;
  process.stderr.write(`test support: ${bin} is missing; running make build in ${root}\n`);
  const r = spawnSync('make', ['build'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0 || !existsSync(bin)) {
    throw new Error(`test support: ${bin} is missing and make build failed: run \`make build\` in ${root} (Go is needed), or set SHARDKEEPER_BIN`);
  }
  return bin;
}

/**
 * A Go command of the repository built into its bin folder (the fake NEAR and Arweave nodes).
 * `go build` is run every time: it relinks only when a source changed, so a stale fake is
 * never used.
 */
export function goBinary(name: string, pkg: string): string {
  const root = repoRoot();
  const bin = join(root, 'bin', name);
  const r = spawnSync('go', ['build', '-o', bin, pkg], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.error || r.status !== 0) {
    if (existsSync(bin)) {
      process.stderr.write(`test support: go build ${pkg} failed; using ${bin} as it is\n`);
      return bin;
    }
    throw new Error(`test support: cannot build ${pkg} (is Go installed?): go build -o bin/${name} ${pkg} in ${root}`);
  }
  return bin;
}
