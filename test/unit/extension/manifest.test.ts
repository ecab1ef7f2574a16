// package.json against the code: the commands it contributes are exactly those the command families register (the
// real registry is constructed over a vscode stand-in), its views, menus and activation events name the ids the code
// uses, every setting the code reads is contributed with a matching type, default, range and choices, and both
// nls files translate every %key% the manifest uses.
// First: the editor modules imported below load `vscode`.
import { vscodeStub } from './vscodeStub';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { before, describe, it } from 'node:test';
import { GPU_CHOICES, MAX_GPU_LAYERS } from '../../../src/backends/llama/hardware';
import { ENGINE_KINDS } from '../../../src/backends/remote/quirks';
import {
  Commands,
  EVENTS_PANEL_VIEW_TYPE,
  LM_VENDOR,
  MCP_PROVIDER_ID,
  MCP_SERVER_LABEL,
  RESULT_DOCUMENT_SCHEME,
  TASKS_VIEW_ID,
  OVERVIEW_VIEW_ID,
  VIEW_CONTAINER_ID,
} from '../../../src/extension/constants';
import { CommandRegistry } from '../../../src/extension/commands/index';
import { plainLocalize } from '../../../src/extension/model/format';
import { DEFAULT_SETTINGS, SETTING_KEYS, readSettings, type ExtensionSettings } from '../../../src/extension/model/settings';
import { taskContextValue } from '../../../src/extension/views/tasksTreeProvider';
import { CANCELLABLE_STATUSES, RESTART_POLICIES, TASK_STATUSES, TERMINAL_STATUSES } from '../../../src/runtime/task';

const ROOT = resolve(__dirname, '../../../..');
const readJson = (name: string) => JSON.parse(readFileSync(join(ROOT, name), 'utf8')) as Record<string, any>;

interface SettingSchema {
  type: string | string[];
  default?: unknown;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  items?: { properties?: Record<string, SettingSchema> };
}

const pkg = readJson('package.json');
const contributes = pkg.contributes as {
  commands: Array<{ command: string; title: string; category?: string }>;
  menus: Record<string, Array<{ command: string; when?: string }>>;
  viewsContainers: Record<string, Array<{ id: string }>>;
  views: Record<string, Array<{ id: string }>>;
  viewsWelcome: Array<{ view: string; contents: string }>;
  configuration: { properties: Record<string, SettingSchema> };
  mcpServerDefinitionProviders: Array<{ id: string; label: string }>;
  languageModelChatProviders: Array<{ vendor: string; displayName: string }>;
};
const sorted = (xs: Iterable<string>) => [...xs].sort();
const settingIds = Object.entries(SETTING_KEYS) as Array<[keyof ExtensionSettings, string]>;

describe('manifest: commands', () => {
  let registered: string[] = [];
  before(() => {
    // Registration reads no dependency; each is used only when its command runs.
    new CommandRegistry({} as ConstructorParameters<typeof CommandRegistry>[0]).dispose();
    registered = [...vscodeStub.registeredCommands];
  });

  it('the code registers exactly the contributed commands, each once, all named in constants.ts', () => {
    assert.ok(registered.length > 0, 'the registry registered nothing');
    assert.deepEqual(sorted(registered), sorted(new Set(registered)), 'a command is registered twice');
    assert.deepEqual(sorted(registered), sorted(contributes.commands.map((c) => c.command)));
    assert.deepEqual(sorted(registered), sorted(Object.values(Commands)));
  });

  it('every command a menu, a welcome link or an activation event names is contributed', () => {
    const contributed = new Set(contributes.commands.map((c) => c.command));
    for (const [menu, items] of Object.entries(contributes.menus)) {
      for (const item of items) assert.ok(contributed.has(item.command), `${menu}: ${item.command}`);
    }
    const nls = readJson('package.nls.json') as Record<string, string>;
    const linked = [...contributes.viewsWelcome.map((w) => w.contents), ...Object.values(nls)].flatMap((s) =>
      [...s.matchAll(/\(command:([\w.]+)/g)].map((m) => m[1]!),
    );
    assert.ok(linked.length > 0);
    for (const id of linked) assert.ok(contributed.has(id), `link to ${id}`);
    for (const e of pkg.activationEvents as string[]) {
      if (e.startsWith('onCommand:')) assert.ok(contributed.has(e.slice('onCommand:'.length)), e);
    }
  });

  it('task menus show for exactly the statuses their commands accept', () => {
    const shownFor = (command: string) => {
      const whens = Object.values(contributes.menus)
        .flat()
        .filter((m) => m.command === command && m.when?.includes('viewItem'))
        .map((m) => m.when!);
      assert.ok(whens.length > 0, `${command} has no task menu`);
      const patterns = whens.map((w) => {
        const m = /viewItem =~ \/(.+?)\/(\s|$)/.exec(w);
        assert.ok(m, `${command}: ${w}`);
        return new RegExp(m[1]!);
      });
      const sets = patterns.map((re) => TASK_STATUSES.filter((s) => re.test(taskContextValue(s))));
      for (const s of sets) assert.deepEqual(s, sets[0], `${command}'s menus disagree`);
      return sets[0];
    };
    assert.deepEqual(shownFor(Commands.cancelTask), [...CANCELLABLE_STATUSES]);
    assert.deepEqual(shownFor(Commands.runNext), ['queued']);
    assert.deepEqual(shownFor(Commands.fetchResult), [...TERMINAL_STATUSES]);
    assert.deepEqual(shownFor(Commands.deleteTask), [...TERMINAL_STATUSES]);
    assert.deepEqual(
      shownFor(Commands.retryTask),
      TERMINAL_STATUSES.filter((s) => s !== 'succeeded'),
    );
    assert.deepEqual(shownFor(Commands.openEvents), [...TASK_STATUSES]);
    assert.deepEqual(shownFor(Commands.copyTaskId), [...TASK_STATUSES]);
  });
});

describe('manifest: views', () => {
  it('the view container, the tasks view, its welcome and the MCP provider use the code ids', () => {
    const containers = Object.values(contributes.viewsContainers).flat();
    assert.deepEqual(
      containers.map((c) => c.id),
      [VIEW_CONTAINER_ID],
    );
    assert.deepEqual(Object.keys(contributes.views), [VIEW_CONTAINER_ID]);
    assert.deepEqual(
      contributes.views[VIEW_CONTAINER_ID]!.map((v) => v.id),
      [TASKS_VIEW_ID, OVERVIEW_VIEW_ID],
    );
    assert.deepEqual(
      contributes.viewsWelcome.map((w) => w.view),
      [TASKS_VIEW_ID],
    );
    assert.deepEqual(contributes.mcpServerDefinitionProviders, [{ id: MCP_PROVIDER_ID, label: MCP_SERVER_LABEL }]);
    assert.deepEqual(
      contributes.languageModelChatProviders.map((p) => p.vendor),
      [LM_VENDOR],
    );
    assert.ok((pkg.activationEvents as string[]).includes(`onWebviewPanel:${EVENTS_PANEL_VIEW_TYPE}`));
  });

  it('menu conditions name the tasks view and the result document scheme', () => {
    const whens = Object.values(contributes.menus)
      .flat()
      .flatMap((m) => (m.when ? [m.when] : []));
    const views = whens.flatMap((w) => [...w.matchAll(/\bview == ([\w.-]+)/g)].map((m) => m[1]!));
    const schemes = whens.flatMap((w) => [...w.matchAll(/\bresourceScheme == ([\w.-]+)/g)].map((m) => m[1]!));
    assert.ok(views.length > 0 && schemes.length > 0);
    assert.deepEqual([...new Set(views)], [TASKS_VIEW_ID]);
    assert.deepEqual([...new Set(schemes)], [RESULT_DOCUMENT_SCHEME]);
  });
});

describe('manifest: settings', () => {
  const properties = contributes.configuration.properties;
  const schemaOf = (key: string) => {
    const schema = properties[`taskRuntime.${key}`];
    assert.ok(schema, `taskRuntime.${key} is read by the code but not contributed`);
    return schema;
  };
  const jsonType = (v: unknown) =>
    v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'number' && Number.isInteger(v) ? 'integer' : typeof v;
  /** Values that keep the cross-setting check (ttl default ≤ ttl max) quiet while one setting is probed. */
  const baseline: Record<string, unknown> = { [SETTING_KEYS.defaultTtlMinutes]: 1, [SETTING_KEYS.maxTtlMinutes]: 5_256_000 };
  const read = (key: string, value: unknown) => readSettings((k) => (k === key ? value : baseline[k]), plainLocalize);

  it('every contributed taskRuntime.* setting is one the code reads, and the reverse', () => {
    assert.deepEqual(sorted(Object.keys(properties)), sorted(settingIds.map(([, key]) => `taskRuntime.${key}`)));
  });

  it("each setting's contributed type and default match the code's default", () => {
    for (const [field, key] of settingIds) {
      const schema = schemaOf(key);
      const types = [schema.type].flat();
      const value = DEFAULT_SETTINGS[field];
      const type = jsonType(value);
      // A duration setting is contributed in its readable spelling ("5m") and read into milliseconds.
      const contributed = typeof schema.default === 'string' && type !== 'string' ? read(key, schema.default).settings[field] : schema.default;
      assert.ok(
        types.includes(type) || (type === 'integer' && types.includes('number')),
        `taskRuntime.${key}: default ${type}, contributed ${types.join('|')}`,
      );
      assert.deepEqual(contributed, value, `taskRuntime.${key} default`);
    }
    assert.deepEqual(read('', undefined).problems, [], 'the probe baseline is valid');
  });

  it("contributed ranges are the code's: the bounds read back, one step past them is refused", () => {
    let probed = 0;
    for (const [field, key] of settingIds) {
      const { minimum, maximum, type } = schemaOf(key);
      if (minimum === undefined || maximum === undefined) continue;
      probed++;
      const step = [type].flat().includes('integer') ? 1 : 0.01;
      for (const ok of [minimum, maximum]) {
        const r = read(key, ok);
        assert.deepEqual(r.problems, [], `taskRuntime.${key} = ${ok}`);
        assert.equal(r.settings[field], ok, `taskRuntime.${key} = ${ok}`);
      }
      for (const bad of [minimum - step, maximum + step]) {
        const r = read(key, bad);
        assert.ok(
          r.problems.some((p) => p.includes(`taskRuntime.${key}`)),
          `taskRuntime.${key} = ${bad} was accepted: ${JSON.stringify(r.problems)}`,
        );
      }
    }
    assert.ok(probed >= 8, `only ${probed} ranged settings`);
    assert.equal(schemaOf(SETTING_KEYS.gpuLayers).maximum, MAX_GPU_LAYERS);
  });

  it("contributed choices are the code's: each reads back as itself, and the lists match the code's lists", () => {
    for (const [field, key] of settingIds) {
      const choices = schemaOf(key).enum;
      if (!choices) continue;
      for (const choice of choices) {
        const r = read(key, choice);
        assert.deepEqual(r.problems, [], `taskRuntime.${key} = ${String(choice)}`);
        assert.equal(r.settings[field], choice);
      }
      assert.ok(
        read(key, 'no-such-choice').problems.some((p) => p.includes(`taskRuntime.${key}`)),
        `taskRuntime.${key} takes any string`,
      );
    }
    assert.deepEqual(schemaOf(SETTING_KEYS.gpu).enum, [...GPU_CHOICES]);
    assert.deepEqual(schemaOf(SETTING_KEYS.defaultRestartPolicy).enum, [...RESTART_POLICIES]);
    assert.deepEqual(schemaOf(SETTING_KEYS.engines).items?.properties?.kind?.enum, [...ENGINE_KINDS]);
  });
});

describe('manifest: translations', () => {
  const used = [...JSON.stringify(pkg).matchAll(/"%([^%"]+)%"/g)].map((m) => m[1]!);
  for (const file of ['package.nls.json', 'package.nls.ko.json']) {
    it(`${file} has every %key% package.json uses, and no other`, () => {
      const nls = readJson(file) as Record<string, unknown>;
      assert.ok(used.length > 0);
      assert.deepEqual(
        used.filter((k) => typeof nls[k] !== 'string' || !nls[k]),
        [],
        'missing',
      );
      assert.deepEqual(
        Object.keys(nls).filter((k) => !used.includes(k)),
        [],
        'unused',
      );
    });
  }
});
