// The shipped bundles carry none of the test fixtures: the MCP conformance ones live in test/fixtures/conformance/ and
// are served only by its test entry point, through the modern door's extraTools and a composite member; the
// `agent-script` model of the real-agent tests (test/fixtures/agents/) likewise, and so are the chat templates the
// tests embed in generated models (test/fixtures/chatTemplates.ts) and the fixtures' MRTR result builders. Reads the esbuild
// output, so it needs a build first (node scripts/build.mjs); a missing bundle fails the test, it never skips.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FIXTURE_MODEL } from '../../fixtures/conformance/backend';
import { FIXTURE_TOOL_NAMES } from '../../fixtures/conformance/tools';
import { AGENT_SCRIPT_MODEL } from '../../fixtures/agents/backend';
import { TOOLS_CHAT_TEMPLATE } from '../../fixtures/chatTemplates';

/** What only the test templates say (their tools system prompt), as it reads in a bundle's string literal. */
const TEMPLATE_MARKS = ['You are provided with function signatures within <tools></tools> XML tags'];
const ROOT = path.resolve(__dirname, '../../../..');
const BUNDLES = ['dist/extension.js', 'dist/cli.js'];

/** What in a bundle would show a fixture: a tool name as a string literal, the fixture model id, the module paths. */
function fixtureTraces(text: string): string[] {
  const found = FIXTURE_TOOL_NAMES.filter((name) => new RegExp(`(['"\`])${name}\\1`).test(text));
  for (const mark of [
    FIXTURE_MODEL,
    'fixtures/conformance',
    'conformanceBackend',
    'modern/fixtures',
    AGENT_SCRIPT_MODEL,
    'fixtures/agents',
    ...TEMPLATE_MARKS,
    'fixtures/chatTemplates',
    'resultType: "input_required"',
  ]) {
    if (text.includes(mark)) found.push(mark);
  }
  return found;
}

test('the fixture list the check looks for is the real one', () => {
  assert.ok(FIXTURE_TOOL_NAMES.includes('greet') && FIXTURE_TOOL_NAMES.includes('slow_compute'));
  assert.ok(FIXTURE_TOOL_NAMES.length >= 15, FIXTURE_TOOL_NAMES.join(', '));
  // The check finds a fixture where there is one (as the bundles were before the fixtures moved to test/).
  assert.deepEqual(fixtureTraces('const tools = [{ name: "greet" }]; // test/fixtures/conformance/tools.ts'), ['greet', 'fixtures/conformance']);
  assert.deepEqual(fixtureTraces('const m = "agent-script"; // test/fixtures/agents/backend.ts'), ['agent-script', 'fixtures/agents']);
  assert.deepEqual(fixtureTraces(`const t = ${JSON.stringify(TOOLS_CHAT_TEMPLATE)};`), TEMPLATE_MARKS);
  assert.deepEqual(fixtureTraces('function inputRequiredResult(r) { return { resultType: "input_required", inputRequests: r }; }'), [
    'resultType: "input_required"',
  ]);
});

for (const bundle of BUNDLES) {
  test(`${bundle} contains no conformance fixture tool, model or module`, () => {
    const file = path.join(ROOT, bundle);
    assert.ok(fs.existsSync(file), `${bundle} is missing: build first (node scripts/build.mjs)`);
    const text = fs.readFileSync(file, 'utf8');
    // The bundle is the real one: it serves our own MCP tools.
    assert.match(text, /["'`]generate_long["'`]/, `${bundle} does not look like the product bundle`);
    assert.deepEqual(fixtureTraces(text), [], `${bundle} carries conformance fixtures`);
  });
}
