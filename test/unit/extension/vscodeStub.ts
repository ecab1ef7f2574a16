// A stand-in for the `vscode` module, so Node unit tests can load editor modules (commands, the tree provider) and
// see what they register without an editor. It has only what those modules touch while loading and while being
// constructed; anything else is undefined, so a module that starts to need more fails here loudly rather than
// passing by accident. Importing this module installs it: import it before any module that loads `vscode`.
import Module from 'node:module';

export interface VscodeStub {
  /** Command ids in the order registerCommand was called. */
  readonly registeredCommands: string[];
  /** Texts written to the clipboard, in order. */
  readonly clipboardWrites: string[];
  /** workspace.getConfiguration(section).update(key, value, target) calls, in order. */
  readonly configUpdates: Array<{ section: string | undefined; key: string; value: unknown; target: unknown }>;
  /** Messages shown (information, warning, error, status bar), in order. */
  readonly messages: string[];
}

type Loader = (request: string, parent: unknown, isMain: boolean) => unknown;

function install(): VscodeStub {
  const registeredCommands: string[] = [];
  const clipboardWrites: string[] = [];
  const configUpdates: VscodeStub['configUpdates'] = [];
  const messages: string[] = [];
  const disposable = { dispose() {} };
  const show = (message: string) => {
    messages.push(message);
    return Promise.resolve(undefined);
  };
  const vscode = {
    l10n: { t: (message: string, ...args: unknown[]) => message.replace(/\{(\d+)\}/g, (_, i: string) => String(args[Number(i)])) },
    commands: {
      registerCommand(id: string) {
        registeredCommands.push(id);
        return disposable;
      },
      executeCommand: () => Promise.resolve(undefined),
    },
    Uri: class Uri {},
    EventEmitter: class EventEmitter<T> {
      private readonly listeners = new Set<(e: T) => void>();
      readonly event = (l: (e: T) => void) => {
        this.listeners.add(l);
        return { dispose: () => this.listeners.delete(l) };
      };
      fire(e: T) {
        for (const l of this.listeners) l(e);
      }
      dispose() {
        this.listeners.clear();
      }
    },
    Disposable: { from: (...ds: Array<{ dispose(): unknown }>) => ({ dispose: () => ds.forEach((d) => d.dispose()) }) },
    LanguageModelTextPart: class LanguageModelTextPart {
      constructor(readonly value: string) {}
    },
    LanguageModelToolCallPart: class LanguageModelToolCallPart {
      constructor(
        readonly callId: string,
        readonly name: string,
        readonly input: object,
      ) {}
    },
    LanguageModelChatToolMode: { Auto: 1, Required: 2 },
    LanguageModelError: class LanguageModelError extends Error {
      static NotFound(message?: string) {
        return Object.assign(new this(message), { code: 'NotFound' });
      }
    },
    lm: {
      registerLanguageModelChatProvider: () => disposable,
      selectChatModels: () => Promise.resolve([]),
    },
    env: {
      clipboard: {
        writeText(text: string) {
          clipboardWrites.push(text);
          return Promise.resolve();
        },
      },
    },
    workspace: {
      getConfiguration: (section?: string) => ({
        update(key: string, value: unknown, target: unknown) {
          configUpdates.push({ section, key, value, target });
          return Promise.resolve();
        },
      }),
    },
    ConfigurationTarget: { Global: 1, Workspace: 2, WorkspaceFolder: 3 },
    window: {
      showInformationMessage: show,
      showWarningMessage: show,
      showErrorMessage: show,
      setStatusBarMessage: (message: string) => {
        messages.push(message);
        return disposable;
      },
    },
  };
  const loader = Module as unknown as { _load: Loader };
  const load = loader._load;
  loader._load = function (request, parent, isMain) {
    return request === 'vscode' ? vscode : load.call(this, request, parent, isMain);
  };
  return { registeredCommands, clipboardWrites, configUpdates, messages };
}

export const vscodeStub = install();
