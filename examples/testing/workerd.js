// @ts-check
// Runs Workers in workerd, Cloudflare's runtime, through miniflare: the relay example bundled
// as wrangler bundles it, or the client's dist/ loaded file by file, unmodified.

import { readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';

const here = dirname(fileURLToPath(import.meta.url));
/** The client package's build output. */
export const clientDist = join(here, '..', '..', 'clients', 'typescript', 'dist');

const compatibilityDate = '2025-01-01';

/**
 * The Worker at entry, bundled with its imports into one ES module (what wrangler deploys),
 * in workerd with bindings.
 *
 * @param {string} entry
 * @param {Record<string, string>} bindings
 */
export async function bundledWorker(entry, bindings) {
  const out = await build({
    entryPoints: [entry],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    write: false,
    logLevel: 'silent',
  });
  return new Miniflare({ modules: true, script: out.outputFiles[0].text, compatibilityDate, bindings });
}

/**
 * A Worker whose module `script` imports the client as "./index.js" from the client's dist/,
 * every file of which is a module of its own, as built.
 *
 * @param {string} script
 * @param {Record<string, string>} bindings
 */
export async function workerOnDist(script, bindings) {
  const files = (await readdir(clientDist)).filter((f) => f.endsWith('.js'));
  if (!files.includes('index.js')) throw new Error(`no index.js in ${clientDist}: build the client first (npm run build)`);
  const modules = [
    { type: /** @type {const} */ ('ESModule'), path: join(clientDist, '__worker.js'), contents: script },
    ...files.map((f) => ({ type: /** @type {const} */ ('ESModule'), path: join(clientDist, f) })),
  ];
  return new Miniflare({ modules, modulesRoot: clientDist, compatibilityDate, bindings });
}
