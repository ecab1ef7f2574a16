// Contract between the shared loopback listener and the doors mounted on it.
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface RequestContext {
  /** Who the bearer token belongs to; tasks are bound to it. */
  principal: string;
  /** Parsed request URL (path and query). */
  url: URL;
  /** Aborted when the client goes away or the listener shuts down. */
  signal: AbortSignal;
}

/** A door's request handler; called only after auth, Host and Origin checks passed. */
export type DoorHandler = (req: IncomingMessage, res: ServerResponse, ctx: RequestContext) => Promise<void>;
