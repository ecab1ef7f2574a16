// The bearer token guarding /lmsp/v1 and /mcp, kept in SecretStorage (shared by the profile's windows).
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { SECRET_TOKEN_KEY } from './constants';
import { Disposable } from './lifecycle';

export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

export class TokenStore extends Disposable {
  private cached: string | undefined;
  private pending: Promise<string> | undefined;
  private readonly _onDidChange = this._register(new vscode.EventEmitter<void>());
  readonly onDidChange = this._onDidChange.event;

  constructor(private readonly secrets: vscode.SecretStorage) {
    super();
    this._register(
      secrets.onDidChange((e) => {
        if (e.key !== SECRET_TOKEN_KEY) return;
        void secrets.get(SECRET_TOKEN_KEY).then((value) => {
          if (value && value !== this.cached) {
            this.cached = value;
            this._onDidChange.fire();
          }
        });
      }),
    );
  }

  /** The token, created on first use. */
  get(): Promise<string> {
    if (this.cached) return Promise.resolve(this.cached);
    this.pending ??= (async () => {
      let token = await this.secrets.get(SECRET_TOKEN_KEY);
      if (!token) {
        token = newToken();
        await this.secrets.store(SECRET_TOKEN_KEY, token);
      }
      this.cached = token;
      return token;
    })().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  async regenerate(): Promise<string> {
    const token = newToken();
    this.cached = token;
    await this.secrets.store(SECRET_TOKEN_KEY, token);
    this._onDidChange.fire();
    return token;
  }
}
