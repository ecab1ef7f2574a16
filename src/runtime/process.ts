// Whether a process exists, for the owners named in files other processes left behind (the data-directory lock,
// the endpoint record). A process that has exited but is not yet reaped by its parent (a zombie: what a SIGKILLed
// owner is for a moment, or for as long as a parent that never waits lives) holds nothing any more: it counts as
// gone, so a restart right after a SIGKILL takes the lock over instead of being refused.
import { readFileSync } from 'node:fs';

export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    // It exists, under another user.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(pid);
}

/** Linux: the process has exited and waits to be reaped (state Z, or X while it goes). Elsewhere: not known, false. */
function isZombie(pid: number): boolean {
  if (process.platform !== 'linux') return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) S …": the name may hold spaces and parentheses, the state follows the last ')'.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return false;
  }
}
