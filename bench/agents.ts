// The agents' doors (issue #38), measured side by side in one run on one `serve`:
//  (a) door cost: a streamed POST /v1/messages against a streamed POST /lmsp/v1/responses, same model, prompt and
//      budget, alternated round by round: first token (median) and tokens/s (median); goal ≤ +1 ms, ≥ 0.97×.
//  (b) prefix reuse across an agent's turns: the real Claude Code and Codex CLI each make two turns (the second one
//      resumes the first conversation) against the test-only agent-script model, through a loopback proxy that
//      records their request bodies; the bodies are then replayed in order on the demo model (only `model` and the
//      output budget changed) and the second turn's cached share of its prompt is read from its usage
//      (`cache_read_input_tokens` / `input_tokens_details.cached_tokens`); goal ≥ 0.9.
// Run directly: node out/bench/agents.js
import * as fs from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { AGENT_SCRIPT_MODEL } from '../test/fixtures/agents/backend';
import { startServe, type Serve } from '../test/fixtures/serveProcess';
import { sseFrames } from '../test/fixtures/sse';
import { runClaude, runCodex, writeCodexConfig } from '../test/support/agents';

const round = (n: number, d = 2) => Math.round(n * 10 ** d) / 10 ** d;
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)];

interface Recorded {
  path: string;
  body: Record<string, any>;
}

/** A loopback proxy to `target` that keeps the JSON bodies of POSTs whose path starts with one of `paths`. */
async function recordingProxy(target: string, paths: string[]): Promise<{ url: string; recorded: Recorded[]; close(): Promise<void> }> {
  const recorded: Recorded[] = [];
  const upstream = new URL(target);
  const server: HttpServer = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const p = (req.url ?? '/').split('?')[0];
      if (req.method === 'POST' && paths.some((x) => p.startsWith(x))) {
        try {
          recorded.push({ path: p, body: JSON.parse(raw.toString('utf8')) as Record<string, any> });
        } catch {
          /* not JSON: not recorded */
        }
      }
      const headers = { ...req.headers, host: upstream.host };
      const out = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (up: IncomingMessage) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      out.on('error', () => res.destroy());
      out.end(raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, recorded, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** POSTs a body and reads the SSE answer: time to the first text delta, output tokens over the text's span, usage. */
async function timedStream(
  url: string,
  token: string,
  body: unknown,
  textEvent: string,
  endEvents: string[],
): Promise<{ ttftMs: number; tps: number; usage: any }> {
  const start = performance.now();
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  if (res.status !== 200) throw new Error(`POST ${new URL(url).pathname}: ${res.status} ${await res.text()}`);
  let first = 0;
  let last = 0;
  let deltas = 0;
  let usage: any;
  for await (const f of sseFrames(res.body)) {
    if (f.event === textEvent) {
      if (!first) first = f.at;
      last = f.at;
      deltas++;
    }
    if (f.event && endEvents.includes(f.event)) {
      const data = JSON.parse(f.data) as any;
      usage = data.usage ?? data.response?.usage ?? usage;
    }
  }
  const outputTokens = usage?.output_tokens ?? deltas;
  return { ttftMs: first - start, tps: last > first ? ((outputTokens - 1) / (last - first)) * 1000 : 0, usage };
}

async function doorCost(server: Serve, model: string, rounds: number, tokens: number): Promise<Record<string, unknown>> {
  const prompt = 'Write a long story about a durable task runtime and the agents that use it.';
  const messages = () =>
    timedStream(
      `${server.url}/v1/messages`,
      server.token,
      { model, max_tokens: tokens, messages: [{ role: 'user', content: prompt }], temperature: 0.8, stream: true },
      'content_block_delta',
      ['message_delta'],
    );
  const responses = () =>
    timedStream(
      `${server.lmsp}/responses`,
      server.token,
      { model, input: prompt, max_output_tokens: tokens, temperature: 0.8, stream: true },
      'response.output_text.delta',
      ['response.completed', 'response.incomplete'],
    );
  await messages();
  await responses();
  const m: Array<{ ttftMs: number; tps: number }> = [];
  const r: Array<{ ttftMs: number; tps: number }> = [];
  for (let i = 0; i < rounds; i++) {
    if (i % 2) {
      r.push(await responses());
      m.push(await messages());
    } else {
      m.push(await messages());
      r.push(await responses());
    }
  }
  const mTtft = median(m.map((x) => x.ttftMs));
  const rTtft = median(r.map((x) => x.ttftMs));
  const mTps = median(m.map((x) => x.tps));
  const rTps = median(r.map((x) => x.tps));
  return {
    rounds,
    tokens,
    messages_first_token_ms: round(mTtft),
    responses_first_token_ms: round(rTtft),
    first_token_added_ms: round(mTtft - rTtft),
    messages_tokens_per_second: Math.round(mTps),
    responses_tokens_per_second: Math.round(rTps),
    tokens_per_second_ratio: round(mTps / rTps),
  };
}

/** The second recorded turn's cached share, after replaying every recorded body in order on `model`. */
async function replayCachedShare(
  server: Serve,
  recorded: Recorded[],
  model: string,
  kind: 'messages' | 'responses',
): Promise<Record<string, unknown>> {
  const turns = recorded.filter((r) => r.body.stream === true);
  if (turns.length < 2) throw new Error(`${kind}: ${turns.length} streamed requests recorded, 2 needed`);
  const shares: number[] = [];
  const prompts: number[] = [];
  for (const t of turns) {
    const body: Record<string, any> = { ...t.body, model };
    let usage: any;
    if (kind === 'messages') {
      body.max_tokens = 8;
      ({ usage } = await timedStream(`${server.url}/v1/messages`, server.token, body, 'content_block_delta', ['message_delta', 'message_start']));
      const read = usage?.cache_read_input_tokens ?? 0;
      const total = (usage?.input_tokens ?? 0) + read + (usage?.cache_creation_input_tokens ?? 0);
      shares.push(total ? read / total : 0);
      prompts.push(total);
    } else {
      body.max_output_tokens = 8;
      ({ usage } = await timedStream(`${server.lmsp}/responses`, server.token, body, 'response.output_text.delta', [
        'response.completed',
        'response.incomplete',
      ]));
      const cached = usage?.input_tokens_details?.cached_tokens ?? 0;
      shares.push(usage?.input_tokens ? cached / usage.input_tokens : 0);
      prompts.push(usage?.input_tokens ?? 0);
    }
  }
  return {
    requests: turns.length,
    prompt_tokens: prompts,
    second_turn_cached_share: round(shares[1], 3),
    last_turn_cached_share: round(shares.at(-1)!, 3),
  };
}

export async function agentsBench(opts: { rounds?: number; tokens?: number } = {}): Promise<Record<string, unknown>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-bench-agents-'));
  // The agents' prompts are long (Claude Code's system and tools are ~75 kB): a context that holds two turns of them.
  const modelPath = path.join(dir, 'agents-demo.gguf');
  writeTestModel(modelPath, { seed: 1, contextLength: 131072 });
  const server = await startServe(['--model', modelPath], path.join(dir, 'data'), [path.join(__dirname, '../test/fixtures/agents/serve.js')]);
  const out: Record<string, unknown> = {};
  try {
    const models = await server.lmspCall('GET', '/models');
    const model = (models.json.data as Array<{ id: string }>).map((m) => m.id).find((id) => id !== AGENT_SCRIPT_MODEL)!;
    out.door_cost = await doorCost(server, model, opts.rounds ?? 15, opts.tokens ?? 128);

    const proxy = await recordingProxy(server.url, ['/v1/messages', '/lmsp/v1/responses']);
    try {
      const home = fs.mkdtempSync(path.join(dir, 'home-'));
      const cwd = fs.mkdtempSync(path.join(dir, 'work-'));
      const claude = { baseUrl: proxy.url, token: server.token, model: AGENT_SCRIPT_MODEL, home, cwd };
      const first = await runClaude(claude, 'Say hello.');
      if (first.out.is_error) throw new Error(`claude: ${first.out.result}`);
      await runClaude(claude, 'And once more.', ['--resume', first.out.session_id]);
      const claudeBodies = proxy.recorded.filter((r) => r.path.startsWith('/v1/messages') && !r.path.includes('count_tokens'));
      out.claude_code = await replayCachedShare(server, claudeBodies, model, 'messages');

      proxy.recorded.length = 0;
      const codex = { baseUrl: `${proxy.url}/lmsp/v1`, token: server.token, model: AGENT_SCRIPT_MODEL, home, cwd };
      writeCodexConfig(codex);
      const c1 = await runCodex(codex, 'Say hello.');
      if (c1.code !== 0) throw new Error(`codex: ${c1.output.slice(-2000)}`);
      await runCodex(codex, 'And once more.', { resumeLast: true });
      out.codex = await replayCachedShare(server, proxy.recorded, model, 'responses');
    } finally {
      await proxy.close();
    }
  } finally {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return out;
}

if (require.main === module) {
  agentsBench()
    .then((r) => process.stdout.write(JSON.stringify(r, null, 2) + '\n'))
    .catch((e: unknown) => {
      process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    });
}
