// The workspace index's commands (issue 41 item 3): Index Workspace, Search Workspace Semantically, and the status
// bar item's pause / resume / cancel. Their work is the WorkspaceIndexController's (workspaceIndex/); this family only
// registers them, so that the registry lists every command the manifest contributes.
import { Commands } from '../constants';
import type { TaskService } from '../host/taskService';
import { Disposable } from '../lifecycle';
import type { TokenStore } from '../tokenStore';
import type { WorkspaceIndexController } from '../workspaceIndex/indexController';
import type { RegisterCommand } from './register';

export interface IndexCommandDeps {
  service: TaskService;
  tokens: TokenStore;
  workspaceIndex: WorkspaceIndexController;
}

export class IndexCommands extends Disposable {
  constructor(d: IndexCommandDeps, register: RegisterCommand) {
    super();
    const token = () => d.tokens.get();
    this._register(register(Commands.indexWorkspace, () => d.workspaceIndex.indexWorkspace(d.service, token)));
    this._register(register(Commands.searchWorkspace, () => d.workspaceIndex.searchWorkspace(d.service, token)));
    this._register(register(Commands.indexControl, () => d.workspaceIndex.control()));
  }
}
