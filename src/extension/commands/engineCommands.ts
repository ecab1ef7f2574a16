// Add Remote Engine: appends an OpenAI-compatible server to taskRuntime.engines, from a preset or from an argument
// object (tests and other extensions run it without UI). The API key goes to SecretStorage only, never to settings,
// and is stored before the setting changes, so the runtime restart that the change causes already finds it.
import * as vscode from 'vscode';
import { z } from 'zod';
import { checkEngineName, normalizeEngineUrl } from '../../backends/remote/config';
import { ENGINE_KINDS, type EngineKind } from '../../backends/remote/quirks';
import { CONFIG_SECTION, Commands, engineKeySecret } from '../constants';
import { Disposable } from '../lifecycle';
import { SETTING_KEYS, type ExtensionSettings } from '../model/settings';
import type { RegisterCommand } from './register';

const t = vscode.l10n.t;

/** Presets of "Add Remote Engine…": each engine's usual OpenAI-style base URL and its kind (what it can do). */
export const ENGINE_PRESETS = [
  { id: 'llamacpp', label: 'llama.cpp server', name: 'llamacpp', url: 'http://127.0.0.1:8080/v1', kind: 'llama.cpp' },
  { id: 'vllm', label: 'vLLM', name: 'vllm', url: 'http://127.0.0.1:8000/v1', kind: 'vllm' },
  { id: 'ollama', label: 'Ollama', name: 'ollama', url: 'http://127.0.0.1:11434/v1', kind: 'ollama' },
  { id: 'lmstudio', label: 'LM Studio', name: 'lmstudio', url: 'http://127.0.0.1:1234/v1', kind: 'lmstudio' },
  { id: 'other', label: 'Other OpenAI-compatible server', name: 'remote', url: 'http://', kind: undefined },
] as const satisfies ReadonlyArray<{ id: string; label: string; name: string; url: string; kind: EngineKind | undefined }>;

/** The argument object Add Remote Engine accepts (tests and other extensions run it without UI). */
export const addEngineArgsSchema = z.strictObject({
  name: z.string().min(1).max(64),
  url: z.string().min(1).max(2000),
  apiKey: z.string().min(1).max(4096).optional(),
  kind: z.enum(ENGINE_KINDS).optional(),
});

export interface EngineCommandDeps {
  log: vscode.LogOutputChannel;
  settings: () => ExtensionSettings;
  /** Where remote engines' API keys are kept. */
  secrets: vscode.SecretStorage;
}

export class EngineCommands extends Disposable {
  constructor(
    private readonly d: EngineCommandDeps,
    register: RegisterCommand,
  ) {
    super();
    this._register(register(Commands.addRemoteEngine, (arg?: unknown) => this.addRemoteEngine(arg)));
  }

  async addRemoteEngine(arg?: unknown): Promise<string | undefined> {
    let input: z.infer<typeof addEngineArgsSchema>;
    const existing = this.d.settings().engines.map((e) => e.name);
    const checkName = (v: string) => {
      try {
        checkEngineName(v);
      } catch (e) {
        return (e as Error).message;
      }
      return existing.includes(v) ? t('An engine named "{0}" exists already.', v) : undefined;
    };
    const checkUrl = (v: string) => {
      try {
        normalizeEngineUrl(v);
      } catch (e) {
        return (e as Error).message;
      }
      return undefined;
    };
    if (arg !== undefined) {
      const parsed = addEngineArgsSchema.safeParse(arg);
      if (!parsed.success) throw new Error(t('Invalid Add Remote Engine arguments: {0}', parsed.error.issues[0].message));
      input = parsed.data;
      const problem = checkName(input.name) ?? checkUrl(input.url);
      if (problem) throw new Error(problem);
    } else {
      const preset = await vscode.window.showQuickPick(
        ENGINE_PRESETS.map((p) => ({ label: p.label, description: p.id === 'other' ? '' : p.url, preset: p })),
        { title: t('Add Remote Engine'), placeHolder: t('Which server runs the models?') },
      );
      if (!preset) return undefined;
      const url = await vscode.window.showInputBox({
        title: t('Add Remote Engine'),
        prompt: t('The OpenAI-style base URL (ending in /v1). Several URLs of one engine, separated by commas, form a pool.'),
        value: preset.preset.url,
        validateInput: (v) =>
          v
            .split(',')
            .map((u) => checkUrl(u))
            .find((m) => m),
      });
      if (!url) return undefined;
      let suggested: string = preset.preset.name;
      for (let i = 2; existing.includes(suggested); i++) suggested = `${preset.preset.name}${i}`;
      const name = await vscode.window.showInputBox({
        title: t('Add Remote Engine'),
        prompt: t('A short name; its models appear as NAME/model-id.'),
        value: suggested,
        validateInput: (v) => checkName(v),
      });
      if (!name) return undefined;
      const apiKey = await vscode.window.showInputBox({
        title: t('Add Remote Engine'),
        prompt: t("API key, if the server needs one (kept in the editor's secret storage, never in settings). Leave empty for none."),
        password: true,
        ignoreFocusOut: true,
      });
      if (apiKey === undefined) return undefined;
      input = { name, url, apiKey: apiKey.trim() || undefined, kind: preset.preset.kind };
    }
    const urls = input.url.split(',').map((u) => normalizeEngineUrl(u));
    if (input.apiKey) await this.d.secrets.store(engineKeySecret(input.name), input.apiKey.trim());
    else await this.d.secrets.delete(engineKeySecret(input.name));
    const config = vscode.workspace.getConfiguration(CONFIG_SECTION);
    const current = (config.get<unknown[]>(SETTING_KEYS.engines) ?? []).filter((e) => (e as { name?: unknown })?.name !== input.name);
    const entry = { name: input.name, urls, ...(input.kind ? { kind: input.kind } : {}) };
    await config.update(SETTING_KEYS.engines, [...current, entry], vscode.ConfigurationTarget.Global);
    this.d.log.info(`remote engine ${input.name} added (${urls.join(', ')})${input.apiKey ? ' with an API key in secret storage' : ''}`);
    return input.name;
  }
}
