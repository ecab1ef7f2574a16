// Window ownership: exactly one extension host owns the store and the listener. This one tries to open the
// store; if another live window owns it, it attaches to that owner's LMSP endpoint and polls to take over when
// the owner goes away (opening the store runs restart recovery). No vscode: the token comes from a callback.
import { isRuntimeError } from '../../runtime/errors';
import { damageSummary } from '../../runtime/store/database';
import { Disposable, toDisposable, type IDisposable } from '../lifecycle';
import { LocalTaskSource } from '../model/localTaskSource';
import { RemoteTaskSource } from '../model/remoteTaskSource';
import type { ExtensionSettings } from '../model/settings';
import { SwitchingTaskSource } from '../model/switchingTaskSource';
import { EDITOR_PRINCIPAL } from '../constants';
import { isProcessAlive } from '../../runtime/process';
import { readEndpointRecord, type EndpointRecord } from './endpointRecord';
import { openLocalHost, type LocalHost } from './localHost';
import type { WorkspaceIndexSource } from '../../workspaceIndex/reader';

export type ServiceRole = 'starting' | 'owner' | 'client' | 'waiting' | 'stopped' | 'failed';

export interface EndpointInfo {
  url: string;
  port: number;
  lmspUrl: string;
  mcpUrl: string;
}

export interface TaskServiceOptions {
  dataDir: string;
  settings: () => ExtensionSettings;
  token: () => Promise<string>;
  log: (message: string) => void;
  /** A remote engine's API key (SecretStorage). */
  engineKey?: (name: string) => Promise<string | undefined>;
  /** The completion webhook's signing secret (SecretStorage). */
  webhookSecret?: () => Promise<string>;
  /** This window's workspace index, served by the MCP door's search_workspace tool while this window owns it. */
  workspaceIndex?: WorkspaceIndexSource;
  /** How often a non-owner checks whether it can take over. */
  pollMs?: number;
  /**
   * Called once when this window opened a store whose journal was damaged (the user must hear about it; the log
   * gets the details). `unrecoveredBatches`: acknowledged write batches that could not be restored.
   */
  onStoreDamage?: (damage: { unrecoveredBatches: number; summary: string }) => void;
}

export class TaskService extends Disposable {
  readonly source = this._register(new SwitchingTaskSource());
  private host: LocalHost | undefined;
  private remote: RemoteTaskSource | undefined;
  private local: LocalTaskSource | undefined;
  private attachedTo: string | undefined;
  private _role: ServiceRole = 'stopped';
  private _endpoint: EndpointInfo | undefined;
  private _lastError: string | undefined;
  private pollTimer: ReturnType<typeof setTimeout> | undefined;
  private transition: Promise<void> = Promise.resolve();
  private readonly listeners = new Set<() => void>();

  constructor(private readonly options: TaskServiceOptions) {
    super();
    this._register(toDisposable(() => this.stopPolling()));
  }

  get role(): ServiceRole {
    return this._role;
  }
  get endpoint(): EndpointInfo | undefined {
    return this._endpoint;
  }
  get lastError(): string | undefined {
    return this._lastError;
  }
  /** The owned runtime (owner only). */
  get runtime() {
    return this.host?.runtime;
  }

  /** Fired when the role or the endpoint changes. */
  onDidChangeState(listener: () => void): IDisposable {
    this.listeners.add(listener);
    return toDisposable(() => this.listeners.delete(listener));
  }

  private fire(): void {
    for (const l of this.listeners) l();
  }

  private serial(work: () => Promise<void>): Promise<void> {
    this.transition = this.transition.then(work, work);
    return this.transition;
  }

  start(): Promise<void> {
    return this.serial(() => this.tryStart());
  }

  /** Closes what this window runs and starts again (new settings, Restart Server). */
  restart(): Promise<void> {
    return this.serial(async () => {
      await this.shutdown();
      await this.tryStart();
    });
  }

  /** The token changed: the owner swaps its listener's token, a client re-attaches with it. */
  tokenChanged(): Promise<void> {
    return this.serial(async () => {
      const token = await this.options.token();
      if (this.host) this.host.setToken(token);
      else if (this._role === 'client') {
        this.attachedTo = undefined;
        await this.attachOrWait();
      }
      this.fire();
    });
  }

  private async tryStart(): Promise<void> {
    if (this.isDisposed) return;
    this.stopPolling();
    this._role = 'starting';
    this.fire();
    const token = await this.options.token();
    try {
      const host = await openLocalHost({
        dataDir: this.options.dataDir,
        settings: this.options.settings(),
        token,
        log: this.options.log,
        engineKey: this.options.engineKey,
        webhookSecret: this.options.webhookSecret,
        workspaceIndex: this.options.workspaceIndex,
      });
      if (this.isDisposed) {
        await host.close();
        return;
      }
      this.becomeOwner(host);
      const summary = damageSummary(host.storeReport);
      if (summary) {
        this.options.log(`WARNING: ${summary}`);
        this.options.onStoreDamage?.({ unrecoveredBatches: host.storeReport.unrecoveredBatches, summary });
      }
    } catch (e) {
      if (isRuntimeError(e, 'store_locked')) {
        this.options.log('another window owns the task store; attaching to its endpoint');
        await this.attachOrWait();
      } else {
        this._role = 'failed';
        this._lastError = e instanceof Error ? e.message : String(e);
        this.options.log(`could not start the task runtime: ${this._lastError}`);
        this.source.setSource(undefined);
        this.fire();
      }
    }
  }

  private becomeOwner(host: LocalHost): void {
    this.dropRemote();
    this.host = host;
    this.local = new LocalTaskSource(host.runtime, EDITOR_PRINCIPAL);
    this._role = 'owner';
    this._lastError = undefined;
    this._endpoint = { url: host.endpoint.url, port: host.endpoint.port, lmspUrl: host.endpoint.lmspUrl, mcpUrl: host.endpoint.mcpUrl };
    this.source.setSource(this.local);
    this.options.log(`owning the task store; listening on ${host.endpoint.url}`);
    this.fire();
  }

  private async attachOrWait(): Promise<void> {
    const record = await readEndpointRecord(this.options.dataDir);
    if (record && record.pid !== process.pid && isProcessAlive(record.pid)) {
      const key = `${record.pid}|${record.url}`;
      if (this.attachedTo !== key || !this.remote) {
        this.attach(record, await this.options.token());
        this.attachedTo = key;
      }
    } else if (this._role !== 'waiting') {
      // The owner is starting (no record yet) or just died (the lock frees soon).
      this.dropRemote();
      this._role = 'waiting';
      this._endpoint = undefined;
      this.source.setSource(undefined);
      this.fire();
    }
    this.schedulePoll();
  }

  private attach(record: EndpointRecord, token: string): void {
    this.dropRemote();
    const lmspUrl = `${record.url}/lmsp/v1`;
    // Tasks made here are the editor's: the owner takes the origin claim from the editor token only.
    this.remote = new RemoteTaskSource({ lmspUrl, token, editorOrigin: true, log: this.options.log });
    this._role = 'client';
    this._endpoint = { url: record.url, port: record.port, lmspUrl, mcpUrl: `${record.url}/mcp` };
    this.source.setSource(this.remote);
    this.options.log(`attached to the owner window (pid ${record.pid}) at ${record.url}`);
    this.fire();
  }

  private dropRemote(): void {
    if (this.remote) {
      if (this.source.isReady) this.source.setSource(undefined);
      this.remote.dispose();
      this.remote = undefined;
    }
    this.attachedTo = undefined;
  }

  private schedulePoll(): void {
    this.stopPolling();
    if (this.isDisposed) return;
    this.pollTimer = setTimeout(() => void this.serial(() => this.poll()), this.options.pollMs ?? 2000);
  }

  private stopPolling(): void {
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
  }

  private async poll(): Promise<void> {
    if (this.isDisposed || this.host) return;
    const record = await readEndpointRecord(this.options.dataDir);
    const ownerAlive = !!record && record.pid !== process.pid && isProcessAlive(record.pid);
    if (ownerAlive && this._role === 'client' && this.attachedTo === `${record!.pid}|${record!.url}`) {
      this.schedulePoll();
      return;
    }
    // Owner gone, changed, or not yet recorded: try to take the store; store_locked re-attaches or waits.
    await this.tryStart();
  }

  private async shutdown(): Promise<void> {
    this.stopPolling();
    this.dropRemote();
    this.source.setSource(undefined);
    const host = this.host;
    this.host = undefined;
    this.local?.dispose();
    this.local = undefined;
    this._endpoint = undefined;
    this._role = 'stopped';
    if (host) await host.close();
  }

  /** Closes the runtime and the listener (deactivate). */
  async stop(): Promise<void> {
    await this.serial(() => this.shutdown());
    this.fire();
  }

  override dispose(): void {
    void this.stop();
    super.dispose();
  }
}
