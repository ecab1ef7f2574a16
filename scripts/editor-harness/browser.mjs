// Debian's chromium driven by playwright-core (no browser download).
import { createRequire } from 'node:module';
import { paths, repoRoot } from './paths.mjs';

const require = createRequire(`${repoRoot}/package.json`);

export async function launchBrowser() {
  const { chromium } = require('playwright-core');
  return chromium.launch({
    executablePath: paths.chromium,
    headless: true,
    // Running as root in a container needs --no-sandbox; /dev/shm is small there.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}
