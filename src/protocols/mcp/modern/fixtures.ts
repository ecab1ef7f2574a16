// TEST ONLY (`serve --conformance-fixtures`): the fixture tools the MCP conformance suite (0.2.0-alpha.12 tasks-*
// scenarios) calls, served on the 2026-07-28 era only. greet answers at once; slow_compute, failing_job and
// confirm_delete run as ordinary runtime tasks on the `conformance-fixture` model (backends/fixture), so they are
// created, journaled, polled and cancelled exactly like generations. Not offered: protocol_error_job (a runtime
// task cannot end in a JSON-RPC error except for request-level codes), multi_input and test_tool_with_task (no tool
// of ours asks for input mid-task or via MRTR) — conformance baseline, docs/mcp.md.
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { FixtureJob } from '../../../backends/fixture/conformanceBackend';
import { FIXTURE_MODEL } from '../../../backends/fixture/conformanceBackend';
import type { CallerContext, McpContext } from '../context';
import { invalidParams } from '../errors';
import { answerWhenDone, createToolTask, effectiveTtl } from '../toolCall';
import { describeIssues } from '../tools';
import { modernTask } from './modernTasks';
import { missingTasksExtension } from './wire';

interface Fixture {
  name: string;
  description: string;
  args: z.ZodType;
  /** optional: task with the extension, sync without; required: -32021 without; sync: never a task. */
  mode: 'sync' | 'optional' | 'required';
  job?: (args: never) => FixtureJob;
}

const FIXTURES: Fixture[] = [
  {
    name: 'greet',
    description: 'Conformance fixture: returns "Hello, {name}!" synchronously (name defaults to World).',
    args: z.object({ name: z.string().max(1000).default('World') }).passthrough(),
    mode: 'sync',
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
    args: z.object({}).passthrough(),
    mode: 'required',
    job: () => ({ op: 'fail', afterMs: 1000, message: 'failing_job always fails (conformance fixture)' }),
  },
  {
    name: 'confirm_delete',
    description: 'Conformance fixture: task-only; parks (working) until cancelled. It never asks for input: no tool of ours does yet.',
    args: z.object({ filename: z.string().max(1000).optional() }).passthrough(),
    mode: 'required',
    job: () => ({ op: 'sleep', seconds: 3600, text: 'deleted' }),
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

export async function callFixture(
  ctx: McpContext,
  caller: CallerContext,
  params: Record<string, unknown>,
  tasks: boolean,
): Promise<Record<string, unknown>> {
  const f = BY_NAME.get(params['name'] as string)!;
  if (f.mode === 'required' && !tasks) throw missingTasksExtension(`tool '${f.name}' runs only as a task and`);
  const parsed = f.args.safeParse(params['arguments'] ?? {});
  if (!parsed.success) throw invalidParams(`Invalid arguments for tool '${f.name}': ${describeIssues(parsed.error)}`);
  if (f.mode === 'sync') {
    const text = `Hello, ${(parsed.data as { name: string }).name}!`;
    return { resultType: 'complete', content: [{ type: 'text', text }] };
  }
  const job = f.job!(parsed.data as never);
  const task = createToolTask(ctx, caller, {
    input: { model: FIXTURE_MODEL, input: JSON.stringify(job), max_output_tokens: 16 },
    ttlMs: effectiveTtl(ctx, undefined),
    meta: { tool: f.name, arguments: params['arguments'] ?? {}, asTask: tasks, era: '2026-07-28', fixture: true },
  });
  if (tasks) return { resultType: 'task', ...modernTask(ctx, ctx.runtime.getTask(task.id, caller.principal) ?? task, false) };
  return { ...(await answerWhenDone(ctx, caller, task)), resultType: 'complete' };
}
