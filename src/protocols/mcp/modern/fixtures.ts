// TEST ONLY (`serve --conformance-fixtures`): the fixture tools the MCP conformance suite (0.2.0-alpha.12) calls,
// served on the 2026-07-28 era only.
// - greet answers at once.
// - slow_compute, failing_job, protocol_error_job, confirm_delete and multi_input run as ordinary runtime tasks on
//   the `conformance-fixture` model (backends/fixture), so they are created, journaled, polled and cancelled exactly
//   like generations. confirm_delete and multi_input ask their client for input mid-task through the runtime's
//   generic channel (input_required, tasks/get inputRequests, tasks/update); protocol_error_job ends with a
//   protocol-level error (RequestError → `failed` with a JSON-RPC error).
// - test_tool_with_task gathers a name through MRTR rounds (InputRequiredResult, sealed requestState) before any
//   task exists, then creates the task that uses it.
// - test_input_required_result_* are the MRTR (SEP-2322) probe tools: rounds of input requests, answered by retrying
//   the call with inputResponses and the echoed requestState, then a plain result.
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { elicitation, FIXTURE_MODEL, type FixtureJob } from '../../../backends/fixture/conformanceBackend';
import type { RestartPolicy, InputRequest, InputResponse } from '../../../runtime/task';
import type { CallerContext, McpContext } from '../context';
import { invalidParams } from '../errors';
import { answerWhenDone, createToolTask, effectiveTtl } from '../toolCall';
import { describeIssues } from '../tools';
import { answerable, inputRequiredResult, invalidAnswer, missingInputCapability, type RequestStateSealer } from './mrtr';
import { modernTask } from './modernTasks';
import { missingTasksExtension, type Envelope } from './wire';

type Text = { resultType: 'complete'; content: Array<{ type: 'text'; text: string }> };
const text = (t: string): Text => ({ resultType: 'complete', content: [{ type: 'text', text: t }] });

/**
 * An MRTR exchange before anything runs: rounds of named input requests, each asked with an InputRequiredResult
 * and answered by the client retrying the call with `inputResponses` (and the `requestState` it was given, which
 * carries the answers so far). The round's requests are the keys.
 */
interface MrtrFlow {
  rounds: Array<Record<string, InputRequest>>;
  /** Take answers only with a valid requestState (the tool wants its state round-tripped, not just the answers). */
  requireState?: boolean;
  /** Requests the client has no capability for are left out; a round left empty is skipped (else -32021). */
  skipUnanswerable?: boolean;
}

interface Fixture {
  name: string;
  description: string;
  args: z.ZodType;
  /**
   * sync: never a task; optional: a task with the extension, sync without; required: -32021 without the extension.
   */
  mode: 'sync' | 'optional' | 'required';
  /** MRTR rounds before the tool runs (answers by request name). */
  flow?: MrtrFlow;
  /** The synchronous answer (sync tools). */
  answer?: (args: never, answers: Record<string, InputResponse>) => Text;
  /** The job of the runtime task (task tools). */
  job?: (args: never, answers: Record<string, InputResponse>) => FixtureJob;
  /** The task's on_restart policy (default fail, like every MCP task). */
  onRestart?: RestartPolicy;
}

const NAME_SCHEMA = { type: 'string', title: 'Name' };
const askName = (message = 'What is your name?') => ({ user_name: elicitation(message, 'name', NAME_SCHEMA) });
const sampling = (question: string, maxTokens: number): InputRequest => ({
  method: 'sampling/createMessage',
  params: { messages: [{ role: 'user', content: { type: 'text', text: question } }], maxTokens },
});
const ROOTS: InputRequest = { method: 'roots/list', params: {} };

/** The accepted content of an elicitation answer (or undefined), a sampling answer's text, a roots answer's uris. */
function elicited(a: InputResponse | undefined): Record<string, unknown> | undefined {
  return a?.['action'] === 'accept' && a['content'] && typeof a['content'] === 'object' ? (a['content'] as Record<string, unknown>) : undefined;
}
function sampled(a: InputResponse | undefined): string {
  const c = a?.['content'];
  const blocks = (Array.isArray(c) ? c : [c]) as Array<{ text?: unknown } | undefined>;
  return blocks.map((b) => (typeof b?.text === 'string' ? b.text : '')).join('');
}
function roots(a: InputResponse | undefined): string[] {
  const r = a?.['roots'];
  return Array.isArray(r) ? r.map((x) => String((x as { uri?: unknown }).uri)) : [];
}
const nameOf = (a: InputResponse | undefined) => {
  const n = elicited(a)?.['name'];
  return typeof n === 'string' && n.trim() ? n.trim().slice(0, 200) : 'stranger';
};

const NO_ARGS = z.object({}).passthrough();

const FIXTURES: Fixture[] = [
  {
    name: 'greet',
    description: 'Conformance fixture: returns "Hello, {name}!" synchronously (name defaults to World).',
    args: z.object({ name: z.string().max(1000).default('World') }).passthrough(),
    mode: 'sync',
    answer: (a: { name: string }) => text(`Hello, ${a.name}!`),
  },
  {
    name: 'slow_compute',
    description: 'Conformance fixture: sleeps `seconds`, then returns a result; a task when the client declares the tasks extension.',
    args: z.object({ seconds: z.number().min(0).max(3600), label: z.string().max(1000).optional() }).passthrough(),
    mode: 'optional',
    job: (a: { seconds: number; label?: string }) => ({ op: 'sleep', seconds: a.seconds, text: `Computed after ${a.seconds} s${a.label ? ` (${a.label})` : ''}` }),
  },
  {
    name: 'failing_job',
    description: 'Conformance fixture: task-only; ends with a tool execution error (isError) after about 1 s.',
    args: NO_ARGS,
    mode: 'required',
    job: () => ({ op: 'fail', afterMs: 1000, message: 'failing_job always fails (conformance fixture)' }),
  },
  {
    name: 'protocol_error_job',
    description: 'Conformance fixture: task-only; ends with a protocol-level error (JSON-RPC -32603), so the task is failed with that error.',
    args: NO_ARGS,
    mode: 'required',
    job: () => ({ op: 'protocol_error', afterMs: 300, code: -32603, message: 'protocol_error_job: internal failure (conformance fixture)' }),
  },
  {
    name: 'confirm_delete',
    description: 'Conformance fixture: task-only; asks the client to confirm (input_required, one elicitation), then reports what it did.',
    args: z.object({ filename: z.string().max(1000).optional() }).passthrough(),
    mode: 'required',
    job: (a: { filename?: string }) => ({ op: 'confirm', filename: a.filename ?? 'file.txt' }),
    onRestart: 'retry',
  },
  {
    name: 'multi_input',
    description: 'Conformance fixture: task-only; asks two elicitations at once (both pending together), then reports both answers.',
    args: NO_ARGS,
    mode: 'required',
    job: () => ({ op: 'multi' }),
    onRestart: 'retry',
  },
  {
    name: 'test_tool_with_task',
    description: 'Conformance fixture: asks for a name (MRTR InputRequiredResult) before creating a task that greets with it.',
    args: NO_ARGS,
    mode: 'required',
    flow: { rounds: [askName()], requireState: true },
    job: (_a: unknown, answers) => ({ op: 'sleep', seconds: 0.2, text: `Hello, ${nameOf(answers['user_name'])}! (name gathered before the task was created)` }),
  },
  {
    name: 'test_input_required_result_elicitation',
    description: 'Conformance fixture (MRTR): asks for a name, then greets.',
    args: NO_ARGS,
    mode: 'sync',
    flow: { rounds: [askName()] },
    answer: (_a: unknown, answers) => text(`Hello, ${nameOf(answers['user_name'])}!`),
  },
  {
    name: 'test_input_required_result_sampling',
    description: 'Conformance fixture (MRTR): asks the client\'s model a question, then returns its answer.',
    args: NO_ARGS,
    mode: 'sync',
    flow: { rounds: [{ capital_question: sampling('What is the capital of France?', 100) }] },
    answer: (_a: unknown, answers) => text(`The client's model said: ${sampled(answers['capital_question'])}`),
  },
  {
    name: 'test_input_required_result_list_roots',
    description: 'Conformance fixture (MRTR): asks for the client\'s roots, then lists them.',
    args: NO_ARGS,
    mode: 'sync',
    flow: { rounds: [{ client_roots: ROOTS }] },
    answer: (_a: unknown, answers) => text(`Roots: ${roots(answers['client_roots']).join(', ') || '(none)'}`),
  },
  {
    name: 'test_input_required_result_request_state',
    description: 'Conformance fixture (MRTR): asks for a confirmation and accepts the answer only with its sealed requestState.',
    args: NO_ARGS,
    mode: 'sync',
    flow: { rounds: [{ confirm: elicitation('Please confirm', 'ok', { type: 'boolean' }) }], requireState: true },
    answer: (_a: unknown, answers) => text(`state-ok: the requestState was verified (ok=${String(elicited(answers['confirm'])?.['ok'] ?? false)})`),
  },
  {
    name: 'test_input_required_result_multiple_inputs',
    description: 'Conformance fixture (MRTR): asks an elicitation, a sampling and a roots request at once.',
    args: NO_ARGS,
    mode: 'sync',
    flow: { rounds: [{ ...askName(), greeting: sampling('Generate a greeting', 50), client_roots: ROOTS }] },
    answer: (_a: unknown, answers) =>
      text(`Hello, ${nameOf(answers['user_name'])}! Greeting: ${sampled(answers['greeting'])}. Roots: ${roots(answers['client_roots']).join(', ') || '(none)'}`),
  },
  {
    name: 'test_input_required_result_multi_round',
    description: 'Conformance fixture (MRTR): two rounds (name, then favourite colour), state carried between them.',
    args: NO_ARGS,
    mode: 'sync',
    flow: {
      rounds: [
        { step1: elicitation('Step 1: What is your name?', 'name', NAME_SCHEMA) },
        { step2: elicitation('Step 2: What is your favorite color?', 'color', { type: 'string' }) },
      ],
      requireState: true,
    },
    answer: (_a: unknown, answers) => text(`${nameOf(answers['step1'])} likes ${String(elicited(answers['step2'])?.['color'] ?? 'no colour')}`),
  },
  {
    name: 'test_input_required_result_tampered_state',
    description: 'Conformance fixture (MRTR): an integrity-protected requestState; an altered one is refused with -32602.',
    args: NO_ARGS,
    mode: 'sync',
    flow: { rounds: [{ confirm: elicitation('Please confirm', 'ok', { type: 'boolean' }) }], requireState: true },
    answer: () => text('state-ok'),
  },
  {
    name: 'test_input_required_result_capabilities',
    description: 'Conformance fixture (MRTR): asks only what the client declared it can answer (sampling, elicitation).',
    args: NO_ARGS,
    mode: 'sync',
    flow: { rounds: [{ question: sampling('Say something', 20), ...askName() }], skipUnanswerable: true },
    answer: (_a: unknown, answers) => text(`Answered: ${Object.keys(answers).join(', ') || 'nothing (no input capability declared)'}`),
  },
];

const BY_NAME = new Map(FIXTURES.map((f) => [f.name, f]));

export function fixtureTools(): Tool[] {
  return FIXTURES.map((f) => {
    const inputSchema = z.toJSONSchema(f.args, { io: 'input' }) as Record<string, unknown>;
    delete inputSchema['$schema'];
    return { name: f.name, description: f.description, inputSchema: inputSchema as Tool['inputSchema'] };
  });
}

export function isFixture(name: unknown): boolean {
  return typeof name === 'string' && BY_NAME.has(name);
}

const MRTR_PARAMS = z
  .object({
    inputResponses: z.record(z.string(), z.unknown()).optional(),
    requestState: z.string().max(64 * 1024).optional(),
  })
  .passthrough();

/** Sealed between rounds: which round the client was last asked, and the answers so far. */
interface FlowState {
  round: number;
  answers: Record<string, InputResponse>;
}

/**
 * One MRTR step: the answers of every round when the exchange is complete, or the InputRequiredResult to send.
 * Answers count only for the round the client was asked (the one in its requestState; the first without one).
 */
function mrtrStep(
  flow: MrtrFlow,
  params: z.infer<typeof MRTR_PARAMS>,
  envelope: Envelope,
  seal: (s: FlowState) => string,
  open: (state: string) => FlowState,
): { answers: Record<string, InputResponse> } | { ask: Record<string, unknown> } {
  const state = params.requestState !== undefined ? open(params.requestState) : undefined;
  let { round, answers } = state ?? { round: 0, answers: {} };
  const responses = flow.requireState && !state ? {} : (params.inputResponses ?? {});
  let fresh = true;
  while (round < flow.rounds.length) {
    const all = flow.rounds[round];
    const offered = answerable(envelope, all);
    if (Object.keys(offered).length === 0) {
      if (!flow.skipUnanswerable) throw missingInputCapability(Object.values(all));
      round++;
      continue;
    }
    if (fresh) {
      // Well-formed answers to this round's requests are taken; anything else is ignored (and asked again).
      for (const [name, request] of Object.entries(offered)) {
        if (answers[name] === undefined && invalidAnswer(request.method, responses[name]) === undefined) answers = { ...answers, [name]: responses[name] as InputResponse };
      }
    }
    const missing = Object.keys(offered).filter((n) => answers[n] === undefined);
    if (missing.length) return { ask: inputRequiredResult(Object.fromEntries(missing.map((n) => [n, offered[n]])), seal({ round, answers })) };
    round++;
    fresh = false; // the next round has not been asked yet: nothing in this call answers it
  }
  return { answers };
}

export interface FixtureCall {
  envelope: Envelope;
  /** The request declared the tasks extension. */
  tasks: boolean;
  sealer: RequestStateSealer;
}

export async function callFixture(ctx: McpContext, caller: CallerContext, params: Record<string, unknown>, call: FixtureCall): Promise<Record<string, unknown>> {
  const f = BY_NAME.get(params['name'] as string)!;
  if (f.mode === 'required' && !call.tasks) throw missingTasksExtension(`tool '${f.name}' runs only as a task and`);
  const parsed = f.args.safeParse(params['arguments'] ?? {});
  if (!parsed.success) throw invalidParams(`Invalid arguments for tool '${f.name}': ${describeIssues(parsed.error)}`);
  let answers: Record<string, InputResponse> = {};
  if (f.flow) {
    const mrtr = MRTR_PARAMS.safeParse(params);
    if (!mrtr.success) throw invalidParams(`Invalid params: ${describeIssues(mrtr.error)}`);
    const binding = { principal: caller.principal, tool: f.name, arguments: parsed.data };
    const step = mrtrStep(
      f.flow,
      mrtr.data,
      call.envelope,
      (s) => call.sealer.seal(binding, s),
      (state) => {
        const s = call.sealer.open(binding, state) as FlowState | undefined;
        if (!s || typeof s.round !== 'number' || !s.answers || typeof s.answers !== 'object') throw invalidParams('Invalid params: requestState is not one this server issued');
        return s;
      },
    );
    if ('ask' in step) return step.ask;
    answers = step.answers;
  }
  if (f.answer) return f.answer(parsed.data as never, answers);
  if (!f.job) throw new McpError(-32603, `fixture ${f.name} has nothing to run`);
  const job = f.job(parsed.data as never, answers);
  const task = createToolTask(ctx, caller, {
    input: { model: FIXTURE_MODEL, input: JSON.stringify(job), max_output_tokens: 16 },
    ttlMs: effectiveTtl(ctx, undefined),
    onRestart: f.onRestart,
    meta: { tool: f.name, arguments: params['arguments'] ?? {}, asTask: call.tasks, era: '2026-07-28', fixture: true },
  });
  if (call.tasks) return { resultType: 'task', ...modernTask(ctx, ctx.runtime.getTask(task.id, caller.principal) ?? task, false) };
  return { ...(await answerWhenDone(ctx, caller, task)), resultType: 'complete' };
}
