// What a test needs before it can run, and the one rule for when it may skip.
//
// - A build output (the bundled `task-runtime serve`): never a skip. A missing bundle is an error that names the
//   command that builds it; a suite that skipped for it read as a pass in a summary nobody scrolls back to, and hid
//   the restart paths behind a green run.
// - Something this machine may not allow or have (a tmpfs mount needs root; a pinned npm tool needs the registry on
//   its first run): a skip with the reason outside CI, a failure in CI (`CI` set and not "false"/"0"), so CI cannot
//   lose the coverage without anyone seeing it. test/fixtures/fileFaults.ts and test/protocol/mcp/toolCache.ts use it.
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The repository root (this file runs as out/test/support/prerequisites.js). */
export const REPO_ROOT = path.resolve(__dirname, '../../..');

/** The path of a build output (relative to the repository root, or absolute), or an error that says how to build it. */
export function requireBuilt(file: string): string {
  const full = path.resolve(REPO_ROOT, file);
  if (!fs.existsSync(full)) {
    throw new Error(`${file} is not built (no ${full}): run \`node scripts/build.mjs\` (or \`npm run build\`) first`);
  }
  return full;
}

/** The bundled CLI: dist/cli.js, or TASK_RUNTIME_CLI when dist/ is being rebuilt by someone else. */
export function builtCli(): string {
  return requireBuilt(process.env.TASK_RUNTIME_CLI ?? 'dist/cli.js');
}

export const IN_CI = !!process.env.CI && !/^(false|0)$/i.test(process.env.CI);

/**
 * The `skip` option for a test that needs what this machine may not allow (`unavailable` says why not, or is
 * undefined): the reason outside CI; `false` in CI, where the test then runs and must fail on its own.
 */
export function skipOutsideCi(unavailable: string | undefined): string | false {
  return unavailable && !IN_CI ? unavailable : false;
}
