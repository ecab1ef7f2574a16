// Starts code-server (Node 24) on a free loopback port with its own user-data and extensions dirs, and installs
// .vsix files into it. Used by the integration and UI runners.
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { paths } from './paths.mjs';

export function requirePrepared() {
  for (const [what, p] of [
    ['Node 24', paths.node],
    ['code-server', paths.codeServerEntry],
    ['chromium', paths.chromium],
  ]) {
    if (!existsSync(p)) {
      throw new Error(`editor harness: ${what} missing at ${p}; run \`node scripts/editor-harness/prepare.mjs\` first`);
    }
  }
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** A profile: user-data dir with quiet settings, an extensions dir and a workspace folder. */
export function makeProfile(root, extraSettings = {}) {
  const profile = {
    root,
    userDataDir: join(root, 'user-data'),
    extensionsDir: join(root, 'extensions'),
    workspace: join(root, 'workspace'),
    config: join(root, 'code-server.yaml'),
  };
  for (const d of [join(profile.userDataDir, 'User'), profile.extensionsDir, profile.workspace]) mkdirSync(d, { recursive: true });
  // Without --config code-server writes a config with a random password into the home config dir.
  writeFileSync(profile.config, 'auth: none\n');
  const settings = {
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'telemetry.telemetryLevel': 'off',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'update.mode': 'none',
    'security.workspace.trust.enabled': false,
    'chat.mcp.discovery.enabled': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    ...extraSettings,
  };
  const settingsFile = join(profile.userDataDir, 'User/settings.json');
  if (!existsSync(settingsFile)) writeFileSync(settingsFile, JSON.stringify(settings, null, 2));
  return profile;
}

function codeServerEnv() {
  return { ...process.env, PATH: `${join(paths.node, '..')}:${process.env.PATH}` };
}

export function installExtension(profile, vsix, log = process.stdout) {
  const r = spawnSync(
    paths.node,
    [
      paths.codeServerEntry,
      '--config',
      profile.config,
      '--user-data-dir',
      profile.userDataDir,
      '--extensions-dir',
      profile.extensionsDir,
      '--force',
      '--install-extension',
      vsix,
    ],
    { encoding: 'utf8', env: codeServerEnv() },
  );
  log.write(r.stdout + r.stderr);
  if (r.status !== 0 || !/successfully installed/i.test(r.stdout + r.stderr)) {
    throw new Error(`editor harness: code-server --install-extension ${vsix} failed (exit ${r.status}):\n${r.stdout}${r.stderr}`);
  }
}

async function waitHealthy(url, child, timeoutMs) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`editor harness: code-server exited early with ${child.exitCode}`);
    try {
      const r = await fetch(`${url}/healthz`);
      if (r.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`editor harness: code-server did not answer ${url}/healthz within ${timeoutMs} ms`);
}

/**
 * Starts code-server for a profile. Returns { url, port, stop() }. logFile receives its output.
 * extraEnv lets a runner pass settings to the extension host (it inherits the server's environment).
 */
export async function startCodeServer(profile, { logFile, extraEnv = {}, port } = {}) {
  requirePrepared();
  port ??= await freePort();
  const url = `http://127.0.0.1:${port}`;
  const args = [
    paths.codeServerEntry,
    '--config',
    profile.config,
    '--auth',
    'none',
    '--bind-addr',
    `127.0.0.1:${port}`,
    '--disable-telemetry',
    '--disable-update-check',
    '--disable-workspace-trust',
    '--disable-getting-started-override',
    '--user-data-dir',
    profile.userDataDir,
    '--extensions-dir',
    profile.extensionsDir,
    '--vscode-option',
    'enable-smoke-test-driver',
    profile.workspace,
  ];
  const child = spawn(paths.node, args, { env: { ...codeServerEnv(), ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  if (logFile) {
    const out = createWriteStream(logFile, { flags: 'a' });
    child.stdout.pipe(out);
    child.stderr.pipe(out);
  } else {
    child.stdout.resume();
    child.stderr.resume();
  }
  try {
    await waitHealthy(url, child, 60_000);
  } catch (e) {
    killGroup(child);
    throw e;
  }
  return {
    url,
    port,
    profile,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      killGroup(child, 'SIGTERM');
      const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

function killGroup(child, signal = 'SIGKILL') {
  try {
    // The server spawns the extension host and other children; end the whole group it leads.
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

/** The workbench URL for a folder, with an optional smoke-test-driver payload (array of [key, value]). */
export function workbenchUrl(server, { folder = server.profile.workspace, payload } = {}) {
  const q = new URLSearchParams({ folder });
  if (payload) q.set('payload', JSON.stringify(payload));
  return `${server.url}/?${q}`;
}

/** A path on this machine as the remote URI the workbench uses for it (authority = the Host it was opened on). */
export function remoteUri(server, path) {
  return `vscode-remote://127.0.0.1:${server.port}${path}`;
}
