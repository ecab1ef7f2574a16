// How every command runs. A failure is logged and shown to the user; a programmatic caller (one that passed a task
// id or an argument object) also gets the rejection, while a UI invocation (palette: no argument; tree: a node,
// which has a `kind`) gets only the message, so VS Code does not report it a second time.
import * as vscode from 'vscode';
import type { CommandId } from '../constants';

const t = vscode.l10n.t;

/** Registers one command with the shared error handling; the caller owns the returned registration. */
export type RegisterCommand = (id: CommandId, fn: (...args: any[]) => unknown) => vscode.Disposable;

export function commandRegistrar(log: vscode.LogOutputChannel): RegisterCommand {
  return (id, fn) =>
    vscode.commands.registerCommand(id, async (...args: unknown[]) => {
      try {
        return await fn(...args);
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        log.error(`${id} failed: ${message}`);
        void vscode.window.showErrorMessage(t('Task Runtime: {0}', message));
        const fromTree = typeof args[0] === 'object' && args[0] !== null && 'kind' in (args[0] as object);
        if (args.length && args[0] !== undefined && !fromTree) throw e;
        return undefined;
      }
    });
}
