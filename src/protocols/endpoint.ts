// Mounts the doors (door.ts) on the one loopback listener: LMSP at /lmsp/v1, the OpenAI-compatible routes at
// /lmsp/v1/responses and /lmsp/v1/chat/completions, MCP at /mcp, Anthropic Messages at /v1 (whose other /v1 paths
// are forwarded to /lmsp/v1, for OpenAI clients with base URL /v1); Prometheus metrics at /metrics.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { TaskRuntimeApi } from '../runtime/api';
import { createAnthropicDoor } from './anthropic/anthropicDoor';
import type { Door } from './door';
import { findMount, longestPrefixFirst, startListener, type ListenerLimits } from './http/listener';
import { HttpProblem } from './http/problem';
import type { DoorHandler } from './http/types';
import { closeDoorDeps, createDoorDeps, type LmspDoorOptions } from './lmsp/deps';
import { LMSP_PREFIX } from './lmsp/lmspConstants';
import { createLmspDoor } from './lmsp/lmspDoor';
import { createMcpDoor, MCP_PREFIX, type McpDoorOptions } from './mcp/mcpDoor';
import { createMetricsDoor } from './metrics/prometheus';
import { createOpenAiDoor } from './openai/openaiDoor';
import { ReasoningSeal } from './shared/reasoningSeal';

export interface EndpointOptions {
  /** 0 picks a free port. */
  port: number;
  /** Bearer token → principal. */
  tokens: Map<string, string>;
  allowedOrigins?: string[];
  log?: (msg: string) => void;
  lmsp?: Omit<LmspDoorOptions, 'log'>;
  mcp?: Omit<McpDoorOptions, 'log'>;
  listenerLimits?: Partial<ListenerLimits>;
  /**
   * Key that seals reasoning handed to clients between turns (Anthropic thinking signatures, Responses
   * `encrypted_content`): the data directory's (reasoningSeal.ts loadOrCreateReasoningKey); absent: this process's.
   */
  reasoningKey?: Buffer;
}

export interface Endpoint {
  url: string;
  port: number;
  lmspUrl: string;
  mcpUrl: string;
  /** An Anthropic client's base URL (ANTHROPIC_BASE_URL): the listener's URL, without /v1. */
  anthropicUrl: string;
  setTokens(tokens: Map<string, string>): void;
  close(): Promise<void>;
}

export async function startEndpoint(runtime: TaskRuntimeApi, opts: EndpointOptions): Promise<Endpoint> {
  const deps = createDoorDeps(runtime, { ...opts.lmsp, log: opts.log, seal: new ReasoningSeal(opts.reasoningKey) });
  const doors: Door[] = [
    createLmspDoor(deps),
    createOpenAiDoor(deps),
    createMcpDoor(runtime, { ...opts.mcp, log: opts.log }),
    createMetricsDoor(runtime),
  ];
  let mounts = longestPrefixFirst(doors.flatMap((d) => d.mounts));
  const forward: DoorHandler = async (req, res, ctx) => {
    const mount = findMount(mounts, ctx.url.pathname);
    if (!mount) throw new HttpProblem(404, 'not_found', 'No such endpoint.');
    return mount.handler(req, res, ctx);
  };
  doors.push(createAnthropicDoor(deps, forward));
  mounts = longestPrefixFirst(doors.flatMap((d) => d.mounts));
  const closeDoors = async () => {
    closeDoorDeps(deps);
    await Promise.all(doors.map((d) => d.close()));
  };
  // A turn of the event loop before the server starts: the doors' set-up and the listener's were one block of the
  // editor's start-up (none over 20 ms).
  await nextTurn();
  const listener = await startListener({
    port: opts.port,
    tokens: opts.tokens,
    allowedOrigins: opts.allowedOrigins,
    log: opts.log,
    limits: opts.listenerLimits,
    doors: mounts,
  }).catch(async (e) => {
    await closeDoors();
    throw e;
  });
  let closing: Promise<void> | undefined;
  return {
    url: listener.url,
    port: listener.port,
    lmspUrl: listener.url + LMSP_PREFIX,
    mcpUrl: listener.url + MCP_PREFIX,
    anthropicUrl: listener.url,
    setTokens: (tokens) => listener.setTokens(tokens),
    close() {
      closing ??= (async () => {
        await closeDoors();
        await listener.close();
      })();
      return closing;
    },
  };
}
