// The signing secret of the editor's completion webhook (taskRuntime.webhook.url), kept in SecretStorage like the
// access token, never in settings: created on first use, shared by the profile's windows, shown only through the
// Copy Webhook Secret command after the user agreed.
import type * as vscode from 'vscode';
import { newWebhookSecret } from '../runtime/webhooks';
import { SECRET_WEBHOOK_KEY } from './constants';

/** The secret, created (and stored) when there is none yet. */
export async function webhookSecret(secrets: vscode.SecretStorage): Promise<string> {
  const stored = await secrets.get(SECRET_WEBHOOK_KEY);
  if (stored) return stored;
  const secret = newWebhookSecret();
  await secrets.store(SECRET_WEBHOOK_KEY, secret);
  return secret;
}
