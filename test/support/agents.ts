// Where the real coding agents are and how they are pointed at us: Claude Code and Codex CLI, pinned, installed from
// npm into a cache outside the repository by scripts/agents/run.mjs (like the editor harness's code-server), run as a
// user would set them up (docs/anthropic.md, docs/codex.md), offline against loopback. Used by test/agents and the
// `agents` bench. A test that needs one and does not find it fails, naming the command that installs it.
import { spawn } from 'node:child_process';
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
  if (!fs.existsSync(bin))
    throw new Error(`${name} ${AGENT_VERSIONS[name]} is not installed (no ${bin}): run \`node scripts/agents/run.mjs --install-only\``);
  return bin;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(bin: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<Run> {
  const child = spawn(bin, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export interface ClaudeSetup {
  /** The server's base URL, without /v1 (ANTHROPIC_BASE_URL). */
  baseUrl: string;
  token: string;
  model: string;
  /** HOME of the client (its settings and sessions). */
  home: string;
  cwd: string;
}

export interface ClaudeResult {
  is_error: boolean;
  result: string;
  num_turns: number;
  session_id: string;
}

/** `claude -p PROMPT --output-format json [...extra]`, every model variable on our model (docs/anthropic.md). */
export async function runClaude(
  s: ClaudeSetup,
  prompt: string,
  extra: string[] = [],
): Promise<{ code: number | null; out: ClaudeResult; stderr: string }> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: s.home,
    ANTHROPIC_BASE_URL: s.baseUrl,
    ANTHROPIC_AUTH_TOKEN: s.token,
    ANTHROPIC_API_KEY: '',
    ANTHROPIC_MODEL: s.model,
    ANTHROPIC_DEFAULT_OPUS_MODEL: s.model,
    ANTHROPIC_DEFAULT_SONNET_MODEL: s.model,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: s.model,
    CLAUDE_CODE_SUBAGENT_MODEL: s.model,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    ENABLE_TOOL_SEARCH: 'false',
    CLAUDE_CODE_MAX_RETRIES: '0',
  };
  const r = await run(agentBin('claude'), ['-p', prompt, '--output-format', 'json', ...extra], s.cwd, env);
  try {
    return { code: r.code, out: JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as ClaudeResult, stderr: r.stderr };
  } catch {
    throw new Error(`claude printed no result (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
  }
}

export interface CodexSetup {
  /** The OpenAI-compatible base URL (the LMSP URL). */
  baseUrl: string;
  token: string;
  model: string;
  /** CODEX_HOME (config.toml, sessions) and HOME. */
  home: string;
  cwd: string;
}

/** The provider configuration of docs/codex.md, written into CODEX_HOME. */
export function writeCodexConfig(s: CodexSetup): void {
  const lines = [
    `model = "${s.model}"`,
    'model_provider = "taskruntime"',
    'model_context_window = 32768',
    '[model_providers.taskruntime]',
    'name = "Task Runtime"',
    `base_url = "${s.baseUrl}"`,
    'env_key = "TASK_RUNTIME_TOKEN"',
    'wire_api = "responses"',
    'request_max_retries = 0',
    'stream_max_retries = 0',
  ];
  fs.writeFileSync(path.join(s.home, 'config.toml'), lines.join('\n') + '\n');
}

/** `codex exec [resume --last] PROMPT`; `last`: the final agent message (--output-last-message). */
export async function runCodex(
  s: CodexSetup,
  prompt: string,
  options: { resumeLast?: boolean } = {},
): Promise<{ code: number | null; last: string; output: string }> {
  const lastFile = path.join(s.home, `last-${process.hrtime.bigint()}.txt`);
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: s.home, CODEX_HOME: s.home, TASK_RUNTIME_TOKEN: s.token };
  const head = options.resumeLast ? ['exec', 'resume', '--last'] : ['exec'];
  const args = [...head, '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--output-last-message', lastFile, prompt];
  const r = await run(agentBin('codex'), args, s.cwd, env);
  return { code: r.code, last: fs.existsSync(lastFile) ? fs.readFileSync(lastFile, 'utf8').trim() : '', output: r.stdout + r.stderr };
}
