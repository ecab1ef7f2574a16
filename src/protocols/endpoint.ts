// Mounts the doors on the one loopback listener: LMSP at /lmsp/v1, MCP at /mcp, Anthropic Messages at /v1 (whose
// other /v1 paths are LMSP's, for OpenAI clients with base URL /v1); Prometheus metrics at /metrics.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { TaskRuntimeApi } from '../runtime/api';
import { ANTHROPIC_PREFIX, createAnthropicDoor, MESSAGES_PREFIX } from './anthropic/anthropicDoor';
import { startListener, type ListenerLimits } from './http/listener';
import { LMSP_PREFIX } from './lmsp/lmspConstants';
import { createLmspDoor, type LmspDoorOptions } from './lmsp/lmspDoor';
import { createMcpDoor, type McpDoorOptions } from './mcp/mcpDoor';
import { METRICS_PATH, metricsHandler } from './metrics/prometheus';
import { ReasoningSeal } from './shared/reasoningSeal';

export const MCP_PREFIX = '/mcp';

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
  const seal = new ReasoningSeal(opts.reasoningKey);
  const lmsp = createLmspDoor(runtime, { ...opts.lmsp, log: opts.log, seal });
  const mcp = createMcpDoor(runtime, { ...opts.mcp, log: opts.log });
  const anthropic = createAnthropicDoor(lmsp);
  // A turn of the event loop before the server starts: the doors' set-up and the listener's were one block of the
  // editor's start-up (issue #21 item 4: none over 20 ms).
  await nextTurn();
  const listener = await startListener({
    port: opts.port,
    tokens: opts.tokens,
    allowedOrigins: opts.allowedOrigins,
    log: opts.log,
    limits: opts.listenerLimits,
    doors: [
      { prefix: LMSP_PREFIX, handler: lmsp.handle, problemStyle: 'problem+json' },
      { prefix: MCP_PREFIX, handler: mcp.handle, problemStyle: 'jsonrpc' },
      { prefix: MESSAGES_PREFIX, handler: anthropic.handle, problemStyle: 'anthropic' },
      { prefix: ANTHROPIC_PREFIX, handler: anthropic.handle, problemStyle: 'problem+json' },
      { prefix: METRICS_PATH, handler: metricsHandler(runtime), problemStyle: 'problem+json' },
    ],
  }).catch(async (e) => {
    await Promise.all([lmsp.close(), mcp.close()]);
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
        await Promise.all([lmsp.close(), mcp.close()]);
        await listener.close();
      })();
      return closing;
    },
  };
}
