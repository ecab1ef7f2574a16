// What a door is to the endpoint (endpoint.ts): the paths it mounts on the one listener, each with the form its
// errors take, and how it closes. Everything else a door needs is shared and not its own: authentication, Host and
// Origin checks and connection limits are the listener's (a door never sees an unauthenticated request), task state
// is the runtime's, and stream slots, the reasoning seal and the body limit are the door family's deps
// (lmsp/deps.ts). A new door is one folder exporting a `create…Door` that returns this.
import type { MountedDoor } from './http/listener';

export interface Door {
  readonly mounts: readonly MountedDoor[];
  close(): Promise<void>;
}
