// Every command of the extension, in six families: tasks and the Tasks view, the model, remote engines, this
// window's endpoint and server, the workspace index, the native engine build. Each family registers its own ids (from constants.ts, which package.json must
// contribute; test/unit/extension/manifest.test.ts checks both ways) through one registrar that logs and shows
// failures.
import { Disposable } from '../lifecycle';
import { EndpointCommands, type EndpointCommandDeps } from './endpointCommands';
import { EngineCommands, type EngineCommandDeps } from './engineCommands';
import { IndexCommands, type IndexCommandDeps } from './indexCommands';
import { ModelCommands, type ModelCommandDeps } from './modelCommands';
import { NativeBuildCommands, type NativeBuildCommandDeps } from './nativeBuildCommands';
import { commandRegistrar } from './register';
import { TaskCommands, type TaskCommandDeps } from './taskCommands';

/** What the four families need together (the extension passes one object). */
export type CommandDeps = TaskCommandDeps & ModelCommandDeps & EngineCommandDeps & EndpointCommandDeps & IndexCommandDeps & NativeBuildCommandDeps;

export class CommandRegistry extends Disposable {
  /** The native engine build's command and its start-up offer (nativeBuildCommands.ts). */
  readonly nativeBuild: NativeBuildCommands;

  constructor(d: CommandDeps) {
    super();
    const register = commandRegistrar(d.log);
    this._register(new TaskCommands(d, register));
    this._register(new ModelCommands(d, register));
    this._register(new EngineCommands(d, register));
    this._register(new EndpointCommands(d, register));
    this._register(new IndexCommands(d, register));
    this.nativeBuild = this._register(new NativeBuildCommands(d, register));
  }
}
