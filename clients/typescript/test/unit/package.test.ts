// The package as it ships: dist/ runs on any runtime with fetch and Web Crypto (no Node
// built-ins, no dependencies), exports what the sources export, and its version follows the
// server's API version.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import * as src from '../../src/index.js';
import { API_VERSION } from '../../src/version.js';
import { packageRoot, repoRoot } from '../support/paths.js';

const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as {
  version: string;
  dependencies?: Record<string, string>;
  shardkeeper: { api: string };
};

test('dist imports nothing but its own modules, and uses no Node globals', () => {
  const dist = join(packageRoot(), 'dist');
  const files = readdirSync(dist).filter((f) => f.endsWith('.js'));
  assert.ok(files.includes('index.js'), 'run npm run build first');
  for (const f of files) {
    const js = readFileSync(join(dist, f), 'utf8');
    const specifiers = [...js.matchAll(/^\s*(?:import|export)\b[^\n]*\sfrom\s+['"]([^'"]+)['"];?\s*$/gm), ...js.matchAll(/\bimport\s*\(\s*['"]([^'"]+)['"]/g)];
    for (const m of specifiers) {
      assert.match(m[1]!, /^\.\/[a-z]+\.js$/, `${f} imports ${m[1]}`);
    }
    assert.doesNotMatch(js, /\b(?:Buffer|process|require|__dirname|setImmediate)\b/, `${f} uses a Node global`);
  }
  assert.equal(pkg.dependencies, undefined, 'no runtime dependency');
});

test('the package entry (dist) exports what the sources export', async () => {
  const dist = (await import('@shardkeeper/client')) as Record<string, unknown>;
  assert.deepEqual(Object.keys(dist).sort(), Object.keys(src).sort());
});

test('the version follows the server’s API version', () => {
  const openapi = parse(readFileSync(join(repoRoot(), 'api', 'openapi.yaml'), 'utf8')) as { info: { version: string } };
  assert.equal(API_VERSION, String(openapi.info.version), 'src/version.ts API_VERSION is api/openapi.yaml info.version');
  assert.equal(pkg.shardkeeper.api, API_VERSION, 'package.json shardkeeper.api is API_VERSION');
  // A release of the server is a tag vX.Y.Z (`make build` stamps git describe); the package
  // then takes the same version. Without one, it is 0.<API version>.<patch>.
  const tag = spawnSync('git', ['describe', '--tags', '--abbrev=0', '--match', 'v[0-9]*.[0-9]*.[0-9]*'], { cwd: repoRoot(), encoding: 'utf8' });
  const release = tag.status === 0 ? /^v(\d+\.\d+\.\d+)$/.exec(tag.stdout.trim())?.[1] : undefined;
  if (release) assert.equal(pkg.version, release, `the server's release is ${release}`);
  else assert.match(pkg.version, new RegExp(`^0\\.${API_VERSION}\\.\\d+$`), 'no server release: 0.<API version>.<patch>');
});
