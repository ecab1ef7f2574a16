// The editor's side of the workspace index (issue 41 item 3): the commands "Index Workspace" and "Search Workspace
// Semantically", the listing of files (findFiles with files.exclude, then .gitignore), progress (a cancellable
// notification and a status bar item with pause / resume / cancel), and the embedder — this window's runtime when it
// owns it, else the owner window's LMSP embeddings route with the editor token. The engine (chunking, store,
// incremental update, search) is src/workspaceIndex, on plain Node; the MCP door reads the same index through
// `source` (given to the task service at construction).
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { GitignoreFilter } from '../../workspaceIndex/gitignore';
import { MAX_TOP_K, updateIndex, type Embedder, type ListedFile } from '../../workspaceIndex/indexer';
import { IndexReader, indexDirFor, type WorkspaceIndexSource } from '../../workspaceIndex/reader';
import { IndexStore } from '../../workspaceIndex/store';
import { PATHS } from '../../protocols/lmsp/lmspConstants';
import { Commands, EDITOR_PRINCIPAL } from '../constants';
import type { TaskService } from '../host/taskService';
import { Disposable, toDisposable } from '../lifecycle';
import type { ExtensionSettings } from '../model/settings';

const t = vscode.l10n.t;

/** Files listed at most per run (findFiles' maxResults). */
export const MAX_FILES = 20_000;
const MAX_GLOB_CHARS = 1000;
const MAX_QUERY_CHARS = 8000;
const SEARCH_RESULTS = 20;

interface Run {
  cancel: AbortController;
  paused: boolean;
  resume: (() => void) | undefined;
  done: number;
  total: number;
}

export class WorkspaceIndexController extends Disposable {
  private reader: IndexReader | undefined;
  private run: Run | undefined;
  private readonly status: vscode.StatusBarItem;

  /** The index as the MCP door sees it: this window's workspace's, once built. */
  readonly source: WorkspaceIndexSource = { current: async () => this.readerFor()?.current() };

  constructor(
    private readonly dataDir: string,
    private readonly log: vscode.LogOutputChannel,
    private readonly settings: () => ExtensionSettings,
  ) {
    super();
    this.status = this._register(vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50));
    this.status.command = Commands.indexControl;
    this._register(toDisposable(() => this.run?.cancel.abort()));
    this._register(toDisposable(() => this.reader?.close()));
  }

  private dir(): string | undefined {
    const folders = vscode.workspace.workspaceFolders ?? [];
    return folders.length
      ? indexDirFor(
          this.dataDir,
          folders.map((f) => f.uri.toString()),
        )
      : undefined;
  }

  private readerFor(): IndexReader | undefined {
    const dir = this.dir();
    if (!dir) return undefined;
    if (this.reader?.dir !== dir) {
      this.reader?.close();
      this.reader = new IndexReader(dir);
    }
    return this.reader;
  }

  /** Embeds with `model` (undefined: the setting, else the runtime's default) in this window or at the owner's. */
  private async embedder(service: TaskService, token: () => Promise<string>, model: string | undefined): Promise<Embedder> {
    const runtime = service.runtime;
    if (runtime) {
      return {
        embed: async (texts, signal) => {
          const r = await runtime.embed({ principal: EDITOR_PRINCIPAL, model, inputs: texts, signal });
          return { model: r.model, vectors: r.vectors };
        },
      };
    }
    const endpoint = service.endpoint;
    if (service.role !== 'client' || !endpoint) throw new Error(t('The task runtime is not running yet; try again in a moment.'));
    // The route needs a model id: without one, the first model the owner lists.
    const id = model ?? (await service.source.listModels())[0]?.id;
    if (!id) throw new Error(t('The task runtime has no model to embed with.'));
    const bearer = await token();
    const url = endpoint.lmspUrl.replace(/\/+$/, '') + PATHS.embeddings;
    return {
      embed: async (texts, signal) => {
        const res = await fetch(url, {
          method: 'POST',
          headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ model: id, input: texts, encoding_format: 'float' }),
          signal,
        });
        const body = (await res.json().catch(() => undefined)) as
          { model?: string; data?: Array<{ embedding: number[] }>; error?: { message?: string } } | undefined;
        if (!res.ok || !body?.data) throw new Error(body?.error?.message ?? `embeddings failed: HTTP ${res.status}`);
        return { model: body.model ?? id, vectors: body.data.map((d) => Float32Array.from(d.embedding)) };
      },
    };
  }

  /** Workspace files of `include`, files.exclude and .gitignore applied, as the engine's listing. */
  private async listFiles(include: string, token: vscode.CancellationToken): Promise<ListedFile[]> {
    const uris = await vscode.workspace.findFiles(include, undefined, MAX_FILES, token);
    const filters = new Map<string, GitignoreFilter>();
    const multiRoot = (vscode.workspace.workspaceFolders?.length ?? 0) > 1;
    const files: ListedFile[] = [];
    for (const uri of uris) {
      if (uri.scheme !== 'file') continue;
      const folder = vscode.workspace.getWorkspaceFolder(uri);
      if (!folder) continue;
      let filter = filters.get(folder.uri.fsPath);
      if (!filter) filters.set(folder.uri.fsPath, (filter = new GitignoreFilter(folder.uri.fsPath)));
      if (filter.ignores(vscode.workspace.asRelativePath(uri, false))) continue;
      let stat: fs.Stats;
      try {
        stat = fs.statSync(uri.fsPath);
      } catch {
        continue;
      }
      if (!stat.isFile()) continue;
      files.push({
        path: vscode.workspace.asRelativePath(uri, multiRoot),
        mtime: stat.mtimeMs,
        size: stat.size,
        read: () => fs.promises.readFile(uri.fsPath),
      });
    }
    return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  async indexWorkspace(service: TaskService, token: () => Promise<string>): Promise<void> {
    const dir = this.dir();
    if (!dir) throw new Error(t('Open a folder or workspace to index it.'));
    if (this.run) {
      void vscode.window.showInformationMessage(t('The workspace is being indexed already.'));
      return;
    }
    const include = await vscode.window.showInputBox({
      title: t('Index Workspace'),
      prompt: t('Files to index (a glob); files.exclude and .gitignore are honoured'),
      value: this.settings().indexInclude,
      validateInput: (v) =>
        !v.trim()
          ? t('Give a glob, for example {0}', '**/*.ts')
          : v.length > MAX_GLOB_CHARS
            ? t('At most {0} characters', MAX_GLOB_CHARS)
            : undefined,
    });
    if (include === undefined) return;
    const embedder = await this.embedder(service, token, this.settings().indexModel || undefined);
    const run: Run = { cancel: new AbortController(), paused: false, resume: undefined, done: 0, total: 0 };
    this.run = run;
    this.showStatus();
    let store: IndexStore | undefined;
    try {
      await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: t('Indexing workspace'), cancellable: true },
        async (progress, cancel) => {
          cancel.onCancellationRequested(() => run.cancel.abort());
          const files = await this.listFiles(include.trim(), cancel);
          run.total = files.length;
          this.showStatus();
          store = await IndexStore.open(dir);
          let last = 0;
          const result = await updateIndex(store, {
            files,
            embedder,
            signal: run.cancel.signal,
            gate: () => (run.paused ? new Promise<void>((resolve) => (run.resume = resolve)) : Promise.resolve()),
            onProgress: (p) => {
              run.done = p.done;
              this.showStatus();
              const pct = (100 * p.done) / Math.max(1, p.total);
              progress.report({ message: t('{0}/{1} files', p.done, p.total), increment: pct - last });
              last = pct;
            },
          });
          const summary = t(
            'Workspace index: {0} files embedded, {1} unchanged, {2} left out, {3} dropped (model {4}).',
            result.embedded,
            result.unchanged,
            result.skipped,
            result.dropped,
            result.model,
          );
          this.log.info(summary);
          void vscode.window.showInformationMessage(
            result.interrupted ? t('Indexing stopped at {0}/{1} files; run Index Workspace again to go on.', run.done, run.total) : summary,
          );
        },
      );
    } finally {
      try {
        store?.close();
      } finally {
        this.run = undefined;
        this.status.hide();
      }
    }
  }

  private showStatus(): void {
    const run = this.run;
    if (!run) return this.status.hide();
    this.status.text = run.paused
      ? `$(debug-pause) ${t('Indexing workspace paused: {0}/{1} files', run.done, run.total)}`
      : `$(sync~spin) ${t('Indexing workspace: {0}/{1} files', run.done, run.total)}`;
    this.status.tooltip = t('Pause, resume or cancel indexing');
    this.status.show();
  }

  async control(): Promise<void> {
    const run = this.run;
    if (!run) return;
    const pause = t('Pause');
    const resume = t('Resume');
    const cancel = t('Cancel (finished files are kept)');
    const choice = await vscode.window.showQuickPick(run.paused ? [resume, cancel] : [pause, cancel], { title: t('Indexing workspace') });
    if (choice === pause) run.paused = true;
    if (choice === resume || choice === cancel) {
      run.paused = false;
      run.resume?.();
      run.resume = undefined;
    }
    if (choice === cancel) run.cancel.abort();
    this.showStatus();
  }

  async searchWorkspace(service: TaskService, token: () => Promise<string>): Promise<void> {
    const index = await this.readerFor()?.current();
    if (!index) {
      const build = t('Index Workspace');
      const choice = await vscode.window.showInformationMessage(t('This workspace has no index yet.'), build);
      if (choice === build) await vscode.commands.executeCommand(Commands.indexWorkspace);
      return;
    }
    const query = await vscode.window.showInputBox({
      title: t('Search Workspace Semantically'),
      prompt: t('What to look for ({0} files, {1} chunks, model {2})', index.files, index.chunks, index.model),
      validateInput: (v) =>
        !v.trim() ? t('Type what to look for') : v.length > MAX_QUERY_CHARS ? t('At most {0} characters', MAX_QUERY_CHARS) : undefined,
    });
    if (query === undefined || !query.trim()) return;
    const embedder = await this.embedder(service, token, index.model);
    const { vectors } = await embedder.embed([query], new AbortController().signal);
    if (vectors[0]?.length !== index.dimensions) throw new Error(t('The model now gives vectors of another size: index the workspace again.'));
    const hits = index.search(vectors[0], Math.min(SEARCH_RESULTS, MAX_TOP_K));
    const picked = await vscode.window.showQuickPick(
      hits.map((h) => ({
        label: `${h.path}:${h.startLine}`,
        description: h.score.toFixed(3),
        detail: h.text.replace(/\s+/g, ' ').slice(0, 200),
        hit: h,
      })),
      { title: t('Search Workspace Semantically'), placeHolder: query, matchOnDetail: true },
    );
    if (!picked) return;
    const uri = this.resolve(picked.hit.path);
    if (!uri) throw new Error(t('{0} is no longer in the workspace.', picked.hit.path));
    const range = new vscode.Range(picked.hit.startLine - 1, 0, picked.hit.endLine - 1, 0);
    await vscode.window.showTextDocument(uri, { selection: new vscode.Range(range.start, range.start) });
  }

  /** A result's path (relative; prefixed by the folder's name in a multi-root workspace) → its URI. */
  private resolve(path: string): vscode.Uri | undefined {
    const folders = vscode.workspace.workspaceFolders ?? [];
    if (folders.length === 1) return vscode.Uri.joinPath(folders[0].uri, path);
    const slash = path.indexOf('/');
    const folder = folders.find((f) => f.name === path.slice(0, slash));
    return folder && vscode.Uri.joinPath(folder.uri, path.slice(slash + 1));
  }
}
