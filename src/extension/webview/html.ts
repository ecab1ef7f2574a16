// The events panel's HTML shell: nonce CSP, resources only from the extension's own folders, strings as data.
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';

export function nonce(): string {
  return randomBytes(24).toString('base64url');
}

function escapeAttr(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function webviewRoots(extensionUri: vscode.Uri): vscode.Uri[] {
  return [vscode.Uri.joinPath(extensionUri, 'dist', 'webview'), vscode.Uri.joinPath(extensionUri, 'media')];
}

export function eventsPanelHtml(webview: vscode.Webview, extensionUri: vscode.Uri, taskId: string, strings: Record<string, string>): string {
  return webviewHtml(webview, extensionUri, { script: 'main.js', css: 'events.css', taskId, strings });
}

/** The runtime overview view's shell: the same CSP and resources, its own script and stylesheet. */
export function overviewHtml(webview: vscode.Webview, extensionUri: vscode.Uri, strings: Record<string, string>): string {
  return webviewHtml(webview, extensionUri, { script: 'overview.js', css: 'overview.css', taskId: '', strings });
}

function webviewHtml(
  webview: vscode.Webview,
  extensionUri: vscode.Uri,
  o: { script: string; css: string; taskId: string; strings: Record<string, string> },
): string {
  const { taskId, strings } = o;
  const n = nonce();
  const asset = (...p: string[]) => webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, ...p)).toString();
  const csp = [
    "default-src 'none'",
    `style-src ${webview.cspSource}`,
    `font-src ${webview.cspSource}`,
    `img-src ${webview.cspSource}`,
    `script-src 'nonce-${n}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="${escapeAttr(vscode.env.language)}">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link id="vscode-codicon-stylesheet" rel="stylesheet" href="${asset('dist', 'webview', 'codicon.css')}">
<link rel="stylesheet" href="${asset('media', o.css)}">
<title>${escapeAttr(strings['title'] ?? 'Task')}</title>
</head>
<body data-task-id="${escapeAttr(taskId)}" data-l10n="${escapeAttr(JSON.stringify(strings))}">
<main id="app" aria-live="polite"></main>
<script type="module" nonce="${n}" src="${asset('dist', 'webview', o.script)}"></script>
</body>
</html>`;
}
