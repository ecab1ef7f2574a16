// The signing secret of a `--webhook` endpoint, from its --webhook-secret-file: created with a fresh secret and mode
// 0600 when missing (as the token file is), refused when others may read it or when it holds no valid secret. The
// messages name the file and the principal, never the secret.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { newWebhookSecret, webhookSecretKey } from '../runtime/webhooks';
import { UsageError } from './args';

export function loadOrCreateWebhookSecret(file: string, principal: string): string {
  if (!fs.existsSync(file)) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, newWebhookSecret() + '\n', { mode: 0o600, flag: 'wx' });
  }
  const stat = fs.statSync(file);
  if (!stat.isFile()) throw new UsageError(`--webhook-secret-file ${principal}: ${file} is not a regular file.`);
  if (process.platform !== 'win32' && (stat.mode & 0o077) !== 0) {
    throw new UsageError(
      `--webhook-secret-file ${principal}: ${file} is readable or writable by other users (mode ${(stat.mode & 0o777).toString(8)}); run chmod 600 on it.`,
    );
  }
  const secret = fs.readFileSync(file, 'utf8').split(/\r?\n/)[0].trim();
  const key = webhookSecretKey(secret);
  if (key instanceof Error) throw new UsageError(`--webhook-secret-file ${principal}: ${file}: ${key.message}.`);
  return secret;
}
