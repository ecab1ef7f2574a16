// Whether a process exists, for the owners named in files other processes left behind (the data-directory lock,
// the endpoint record).
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // It exists, under another user.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
