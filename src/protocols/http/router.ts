// Routing inside a door: a table of path patterns and the methods each answers, one dispatch shared by every door
// that has more than one route, so 404, 405 (with Allow) and a badly encoded path parameter read the same on all.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpProblem } from './problem';
import type { RequestContext } from './types';

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, ctx: RequestContext, param: string) => void | Promise<void>;

export interface Route {
  /** Matched against the path below the door's prefix; its first group, if any, is the decoded `param`. */
  pattern: RegExp;
  methods: Record<string, RouteHandler>;
}

/** A pattern matching exactly `path` (regex syntax allowed, e.g. a `([^/]+)` segment). */
export function exact(path: string): RegExp {
  return new RegExp(`^${path}$`);
}

/** Runs the route for `path` (the part below the door's prefix) or throws the problem that says why none ran. */
export async function dispatch(
  routes: readonly Route[],
  path: string,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RequestContext,
): Promise<void> {
  for (const route of routes) {
    const m = route.pattern.exec(path);
    if (!m) continue;
    const handler = route.methods[req.method ?? 'GET'];
    if (!handler) {
      throw new HttpProblem(405, 'method_not_allowed', `${req.method} is not allowed here.`, {
        headers: { Allow: Object.keys(route.methods).join(', ') },
      });
    }
    let param = '';
    if (m[1] !== undefined) {
      try {
        param = decodeURIComponent(m[1]);
      } catch {
        throw new HttpProblem(400, 'invalid_request', 'The path is not validly encoded.');
      }
    }
    await handler(req, res, ctx, param);
    return;
  }
  throw new HttpProblem(404, 'not_found', 'No such endpoint.');
}
