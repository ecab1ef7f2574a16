// Entry of the one-file bench that scripts/gpu-check.sh runs on a bare GPU machine (scripts/gpu-check-prepare.sh
// bundles it with esbuild, `require.main` defined away so that no other bundled module's "run me directly" block
// fires). argv[2] names the part:
//   hardware [tokens]   the hardware section (bench/hardware.ts; also when argv[2] is a number or absent)
//   streams             gpu_streams: ours vs llama-server at 1/4/16/32 streams, the doors' first token (gpuStreams.ts;
//                       settings from GPU_CHECK_* variables)
//   native              native_build: prebuilt binary vs this machine's native build (nativeBuild.ts)
// Each part prints `key value` lines as it measures them.
import { printHardwareBench } from './hardware';
import { gpuStreamsBench } from './gpuStreams';
import { nativeBuildBench } from './nativeBuild';

const print = (r: Record<string, unknown>) => {
  for (const [k, v] of Object.entries(r)) console.log(`${k.padEnd(44)} ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`);
};
const done = (p: Promise<unknown>) =>
  p.then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );

const part = process.argv[2];
if (part === 'streams') void done(gpuStreamsBench({ onPart: print }));
else if (part === 'native') void done(nativeBuildBench({ onPart: print }));
else printHardwareBench(part === 'hardware' ? [process.argv[0]!, process.argv[1]!, ...process.argv.slice(3)] : process.argv);
