// `task-runtime build-engine [--jobs N]` and `serve --engine-build auto|prebuilt` (docs/native-build.md): what they
// accept, and a UsageError naming the mistake for everything else.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_BUILD_JOBS, parseArgs, USAGE, UsageError } from '../../../src/cli/args';

const usage = (argv: string[], pattern: RegExp) =>
  assert.throws(
    () => parseArgs(argv),
    (e: Error) => e instanceof UsageError && pattern.test(e.message),
    argv.join(' '),
  );

test('build-engine takes only --jobs N (1..MAX_BUILD_JOBS), as --jobs N or --jobs=N', () => {
  assert.deepEqual(parseArgs(['build-engine']), { command: 'build-engine' });
  assert.deepEqual(parseArgs(['build-engine', '--jobs', '4']), { command: 'build-engine', jobs: 4 });
  assert.deepEqual(parseArgs(['build-engine', '--jobs=1']), { command: 'build-engine', jobs: 1 });
  assert.deepEqual(parseArgs(['build-engine', `--jobs=${MAX_BUILD_JOBS}`]), { command: 'build-engine', jobs: MAX_BUILD_JOBS });
  for (const bad of ['0', String(MAX_BUILD_JOBS + 1), 'two', '-1', '1.5'])
    usage(['build-engine', '--jobs', bad], /--jobs must be an integer from 1 to/);
  usage(['build-engine', '--jobs'], /--jobs needs a value/);
  usage(['build-engine', '--jobs='], /--jobs needs a value/);
  usage(['build-engine', '--jobs', '2', '--jobs', '3'], /given more than once/);
  usage(['build-engine', '--gpu', 'cuda'], /Unknown option "--gpu" for build-engine/);
  usage(['build-engine', 'now'], /Unexpected argument "now"/);
  assert.deepEqual(parseArgs(['build-engine', '--help']), { command: 'help' });
  assert.match(USAGE, /task-runtime build-engine \[--jobs N\]/);
});

test('serve --engine-build takes auto or prebuilt; absent is auto', () => {
  const serve = (argv: string[]) => parseArgs(['serve', ...argv]) as Extract<ReturnType<typeof parseArgs>, { command: 'serve' }>;
  assert.equal(serve([]).engineBuild, undefined);
  assert.equal(serve(['--engine-build', 'auto']).engineBuild, 'auto');
  assert.equal(serve(['--engine-build=prebuilt']).engineBuild, 'prebuilt');
  usage(['serve', '--engine-build', 'native'], /--engine-build must be auto or prebuilt, got "native"/);
  usage(['serve', '--engine-build'], /--engine-build needs a value/);
});
