// native/decode-and-sample.patch (what build-engine applies to its copy of node-llama-cpp's addon source) still
// applies to the addon this node-llama-cpp ships: an upgrade that moved the code it patches fails here, not in a
// user's build. Also that build.mjs ships the patch where nativeBuild.ts looks for it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { ADDON_PATCHES, addonPatchIds, addonPatchPath, nodeLlamaCppPackage } from '../../../../src/backends/llama/nativeBuild';

describe('the addon patches of the native build', () => {
  it('apply cleanly (git apply --check) to node_modules/node-llama-cpp/llama/addon', () => {
    const llamaDir = fs.realpathSync(path.join(nodeLlamaCppPackage().dir, 'llama'));
    for (const name of ADDON_PATCHES) {
      const patch = addonPatchPath(name);
      assert.ok(fs.existsSync(patch), `${patch} exists`);
      // node_modules lies inside this repo's work tree: the ceiling keeps git from taking paths from its top (it
      // would skip every file and pass).
      const r = spawnSync('git', ['apply', '--check', '--verbose', patch], {
        cwd: llamaDir,
        encoding: 'utf8',
        env: { ...process.env, GIT_CEILING_DIRECTORIES: path.dirname(llamaDir) },
      });
      assert.equal(r.status, 0, `git apply --check ${name}:\n${r.stdout}${r.stderr}`);
      assert.match(r.stderr + r.stdout, /Checking patch addon\/AddonContext\.cpp/);
      assert.doesNotMatch(r.stderr + r.stdout, /Skipped patch/);
    }
  });
  it('add decodeBatchAndSample beside decodeBatch', () => {
    const text = fs.readFileSync(addonPatchPath('decode-and-sample.patch'), 'utf8');
    assert.match(text, /^\+\s+InstanceMethod\("decodeBatchAndSample", &AddonContext::DecodeBatchAndSample\),$/m);
  });
  it('are named with their content hash in the manifest record', () => {
    const ids = addonPatchIds();
    assert.equal(ids.length, ADDON_PATCHES.length);
    assert.match(ids[0]!, /^decode-and-sample\.patch sha256:[0-9a-f]{64}$/);
  });
});
