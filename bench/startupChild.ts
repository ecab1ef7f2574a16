// Child of the start-up benchmark: opens what the editor's owning window opens at start-up (extension/host/
// localHost.ts: the backends, the store, the endpoint) in a fresh process — cold JavaScript and WebAssembly, as after
// an editor restart — under the probe the extension itself uses (startupProbe.ts), and prints its figures.
import { openLocalHost } from '../src/extension/host/localHost';
import { readSettings } from '../src/extension/model/settings';
import { StartupProbe } from '../src/extension/startupProbe';

async function main() {
  // The extension host always has a referenced handle (its IPC channel): without one Node drains every background
  // task of the process whenever its loop has only timers left (scaleBench.ts says what that costs).
  const keepAlive = setInterval(() => {}, 1 << 30);
  const { settings } = readSettings(
    () => undefined,
    (s) => s,
  );
  const probe = new StartupProbe();
  probe.activated();
  const host = await openLocalHost({ dataDir: process.argv[2]!, settings, token: 'b'.repeat(43), log: () => {} });
  const figures = probe.finish();
  process.stdout.write(`${JSON.stringify(figures)}\n`);
  await host.close();
  clearInterval(keepAlive);
  process.exit(0);
}

void main();
