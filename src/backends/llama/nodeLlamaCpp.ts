// node-llama-cpp, imported when the first model loads: it is ESM-only and heavy, so a process that never loads a
// local model (an editor with only remote engines, a CLI command) never pays for it. Every module here reaches it
// through this one import, so its one process-wide side effect (SIGXFSZ, below) is undone in one place.

export type NodeLlamaCpp = typeof import('node-llama-cpp', { with: { 'resolution-mode': 'import' } });

let nodeLlamaCppPromise: Promise<NodeLlamaCpp> | undefined;

export function importNodeLlamaCpp(): Promise<NodeLlamaCpp> {
  if (!nodeLlamaCppPromise) {
    // Node ignores SIGXFSZ, so a write past the file-size limit (ulimit -f, systemd LimitFSIZE) fails with EFBIG and
    // the store refuses writes (store_unwritable). node-llama-cpp pulls in signal-exit (via proper-lockfile), which
    // listens for SIGXFSZ and re-raises it when it is the only listener: once a model had run, the first journal
    // write past the limit would kill the process by SIGXFSZ instead. A listener of our own keeps Node's behaviour.
    process.on('SIGXFSZ', () => {});
    nodeLlamaCppPromise = import('node-llama-cpp');
  }
  return nodeLlamaCppPromise;
}
