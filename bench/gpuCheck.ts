// Entry of the one-file hardware bench that scripts/gpu-check.sh runs on a bare GPU machine
// (scripts/gpu-check-prepare.sh bundles it with esbuild, `require.main` defined away so that no other bundled
// module's "run me directly" block fires). Prints the hardware section; argv[2] = tokens per run.
import { hardwareBench } from './hardware';

hardwareBench({ tokens: process.argv[2] ? Number(process.argv[2]) : undefined })
  .then((r) => {
    for (const [k, v] of Object.entries(r)) console.log(`${k.padEnd(40)} ${typeof v === 'object' ? JSON.stringify(v) : v}`);
    process.exit(0);
  })
  .catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
