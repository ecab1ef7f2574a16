// Entry of the one-file hardware bench that scripts/gpu-check.sh runs on a bare GPU machine
// (scripts/gpu-check-prepare.sh bundles it with esbuild, `require.main` defined away so that no other bundled
// module's "run me directly" block fires). Prints the hardware section; argv[2] = tokens per run.
import { printHardwareBench } from './hardware';

printHardwareBench(process.argv);
