// The editor's side of the native engine build (src/backends/llama/nativeBuild.ts) for the user without the CLI:
// "Task Runtime: Build Native Engine" compiles llama.cpp for this machine (OpenMP, native CPU flags) into the shared
// cache with a cancellable progress notification, then offers to restart the runtime onto it; at the first start
// where cmake and a compiler exist and no build is cached, one notification offers it (never again once dismissed
// with "Don't Ask Again"). The build runs in child processes; the extension keeps serving on the prebuilt binary
// meanwhile. The packaged extension leaves node-llama-cpp's llama.cpp source out (34 MB), so there the command
// says to build with the CLI from npm, whose build this window then uses (same cache).
import * as vscode from 'vscode';
import { buildNativeEngine, missingBuildTools, nativeBuildsRoot, nodeLlamaCppPackage, startupBuildOffer } from '../../backends/llama/nativeBuild';
import { Commands } from '../constants';
import type { TaskService } from '../host/taskService';
import { Disposable } from '../lifecycle';
import type { RegisterCommand } from './register';

const t = vscode.l10n.t;
/** globalState key: the user chose "Don't Ask Again" on the start-up offer. */
const OFFER_DISMISSED = 'taskRuntime.nativeBuildOfferDismissed';

export interface NativeBuildCommandDeps {
  service: Pick<TaskService, 'role' | 'restart'>;
  log: vscode.LogOutputChannel;
}

export class NativeBuildCommands extends Disposable {
  private building?: Promise<void>;

  constructor(
    private readonly d: NativeBuildCommandDeps,
    register: RegisterCommand,
  ) {
    super();
    this._register(register(Commands.buildNativeEngine, () => this.build()));
  }

  build(): Promise<void> {
    // One build at a time per window (a second click joins the first).
    this.building ??= this.runBuild().finally(() => (this.building = undefined));
    return this.building;
  }

  private async runBuild(): Promise<void> {
    const pkg = nodeLlamaCppPackage();
    const missing = missingBuildTools(pkg);
    if (missing.length) throw new Error(t('cannot build the native engine here: missing {0}', missing.join(', ')));
    const root = nativeBuildsRoot();
    const build = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: t('Task Runtime: building the native engine'), cancellable: true },
      async (progress, token) => {
        const controller = new AbortController();
        token.onCancellationRequested(() => controller.abort());
        let done = 0;
        return buildNativeEngine({
          root,
          signal: controller.signal,
          onOutput: (line) => this.d.log.trace(`build-engine: ${line}`),
          onProgress: (p) => {
            this.d.log.info(`build-engine: ${p.message}`);
            const now = p.fraction === undefined ? done : Math.round(p.fraction * 100);
            progress.report({ message: p.message, increment: Math.max(0, now - done) });
            done = now;
          },
        });
      },
    );
    this.d.log.info(`native engine ready: ${build.key} (${build.manifest.buildSeconds} s) in ${build.dir}`);
    const restart = t('Restart Runtime');
    const choice = await vscode.window.showInformationMessage(
      t('Task Runtime: the native engine is built ({0} s). Models load on it from the next start of the runtime.', build.manifest.buildSeconds),
      ...(this.d.service.role === 'owner' ? [restart] : []),
    );
    if (choice === restart) await this.d.service.restart();
  }

  /** At start (owner window): one offer when no build is cached and this machine can make one. */
  async offerAtStart(state: vscode.Memento): Promise<void> {
    if (state.get<boolean>(OFFER_DISMISSED)) return;
    let offer: string | undefined;
    try {
      offer = startupBuildOffer();
    } catch (err) {
      this.d.log.info(`native engine build: not checked (${err instanceof Error ? err.message : String(err)})`);
      return;
    }
    if (!offer) return;
    this.d.log.info(offer);
    const build = t('Build Native Engine');
    const never = t("Don't Ask Again");
    const choice = await vscode.window.showInformationMessage(
      t(
        'Task Runtime: a native engine build for this machine (OpenMP, native CPU flags) measured 1.4x tokens/s on a 674 MB model here and makes more threads pay. Build it now? It takes minutes of CPU; tasks keep running meanwhile.',
      ),
      build,
      never,
    );
    if (choice === never) await state.update(OFFER_DISMISSED, true);
    if (choice === build) await vscode.commands.executeCommand(Commands.buildNativeEngine);
  }
}
