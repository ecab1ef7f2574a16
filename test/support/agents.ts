// Where the real coding agents are: Claude Code and Codex CLI, pinned, installed from npm into a cache outside the
// repository by scripts/agents/run.mjs (the suite's runner), like the editor harness's code-server. A test that needs
// one and does not find it fails, naming the command that installs it.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** The pinned versions (scripts/agents/run.mjs installs exactly these). */
export const AGENT_VERSIONS = { claude: '2.1.328', codex: '0.169.0' } as const;

export function agentsDir(): string {
  return process.env.TASK_RUNTIME_AGENTS_DIR ?? path.join(os.homedir(), '.cache', 'task-runtime-agents');
}

/** The path of an agent's executable, or an error that says how to install it. */
export function agentBin(name: keyof typeof AGENT_VERSIONS): string {
  const bin = path.join(agentsDir(), 'node_modules', '.bin', name);
  if (!fs.existsSync(bin)) throw new Error(`${name} ${AGENT_VERSIONS[name]} is not installed (no ${bin}): run \`node scripts/agents/run.mjs\` once`);
  return bin;
}
