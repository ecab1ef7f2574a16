#!/usr/bin/env node
// Entry point of the `task-runtime` command (bundled to dist/cli.js).
import * as path from 'node:path';
import { writeTestModel } from '../backends/llama/demoModel';
import { writeFamilyModel } from '../backends/llama/familyModel';
import { buildNativeEngine, nativeBuildsRoot } from '../backends/llama/nativeBuild';
import { parseArgs, USAGE, UsageError } from './args';
import { serve } from './serve';

async function main(argv: string[]): Promise<void> {
  const args = parseArgs(argv);
  switch (args.command) {
    case 'help':
      process.stdout.write(USAGE + '\n');
      return;
    case 'make-test-model': {
      const out = path.resolve(args.out);
      if (args.family) writeFamilyModel(out, args.family);
      else writeTestModel(out);
      process.stderr.write(`wrote the tiny random-weight ${args.family ?? 'test'} model to ${out} (its output is noise)\n`);
      return;
    }
    case 'serve':
      await serve(args);
      return;
    case 'build-engine': {
      const root = nativeBuildsRoot();
      const controller = new AbortController();
      process.once('SIGINT', () => controller.abort());
      let shown = -1;
      const build = await buildNativeEngine({
        root,
        ...(args.jobs !== undefined ? { jobs: args.jobs } : {}),
        signal: controller.signal,
        onProgress: (p) => {
          // Compile progress every 5 %, the other phases as they come.
          const pct = p.fraction === undefined ? undefined : Math.floor(p.fraction * 20) * 5;
          if (p.phase === 'compile' && pct === shown) return;
          if (pct !== undefined) shown = pct;
          process.stderr.write(`build-engine: ${p.message}\n`);
        },
      });
      process.stderr.write(`build-engine: ready: ${build.key} (${build.manifest.buildSeconds} s)\n`);
      process.stdout.write(build.bindingPath + '\n');
      return;
    }
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  if (e instanceof UsageError) {
    process.stderr.write(`task-runtime: ${e.message}\n\n${USAGE}\n`);
    process.exit(2);
  }
  process.stderr.write(`task-runtime: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
