// The .gitignore reader of the index's file listing: the root's rules, a deeper file's own rules relative to its
// folder, a deeper negation winning, ignored folders ignoring what is below them, and .git always left out.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import { GitignoreFilter } from '../../../src/workspaceIndex/gitignore';

describe('GitignoreFilter', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wsindex-ignore-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));
  fs.mkdirSync(path.join(root, 'pkg', 'gen'), { recursive: true });
  fs.writeFileSync(path.join(root, '.gitignore'), 'node_modules/\n*.log\nout\n');
  fs.writeFileSync(path.join(root, 'pkg', '.gitignore'), 'gen/\n!keep.log\n');

  it('applies each .gitignore to the paths below its folder', () => {
    const f = new GitignoreFilter(root);
    const cases: Array<[string, boolean]> = [
      ['src/a.ts', false],
      ['node_modules/x/index.js', true],
      ['debug.log', true],
      ['out/main.js', true],
      ['pkg/gen/code.ts', true],
      ['gen/code.ts', false],
      ['pkg/keep.log', false],
      ['pkg/other.log', true],
      ['.git/config', true],
      ['pkg/src/b.ts', false],
    ];
    assert.deepEqual(
      cases.map(([p]) => [p, f.ignores(p)]),
      cases,
    );
  });
});
