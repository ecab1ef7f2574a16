// Lint: type-aware checks the compiler does not make. The two promise rules catch what hurt us (a `void
// this.serial(...)` that could reject unhandled; an async listener whose rejection nothing sees); the rest of
// typescript-eslint's recommended set keeps obvious mistakes out. The rooms' arrows of docs/architecture.md are
// import rules: what a room must never import fails the lint. Run by `npm run lint` (part of `npm test`).
import tseslint from 'typescript-eslint';

/** A `no-restricted-imports` rule forbidding the import paths that match `regex`. */
const forbid = (why, regex) => ['error', { patterns: [{ regex, message: why }] }];
/** An import of a folder of the repository (`../../protocols/x`, `../extension/y`), by its name. */
const folders = (...names) => `(^|/)(${names.join('|')})/`;

export default tseslint.config(
  { ignores: ['out/**', 'dist/**', 'node_modules/**', '.gpu-check/**', '**/*.mjs', '**/*.js'] },
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'webview-ui/src/**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test's test/describe/it return promises the runner itself awaits.
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      // Code after a return (a merge once left a second, dead return in restartNeeded).
      'no-unreachable': 'error',
      // A `let` assigned once after closures that read it (stream writers) is not a const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Tests and benches read loosely-typed JSON from the wire.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  // The rooms (docs/architecture.md): runtime imports no door, backend, editor or HTTP; backends no door or editor
  // (the SSE parser is the one shared reader); doors no backend or editor; nothing in src/ imports a test.
  {
    files: ['src/runtime/**/*.ts'],
    rules: {
      'no-restricted-imports': forbid(
        'runtime/ imports no door, backend, editor or HTTP (docs/architecture.md)',
        `^(vscode|node:http|http)$|${folders('protocols', 'backends', 'extension', 'cli', 'test', 'bench')}`,
      ),
    },
  },
  {
    files: ['src/backends/**/*.ts'],
    rules: {
      'no-restricted-imports': forbid(
        'backends/ import no door or editor (docs/architecture.md)',
        `^vscode$|(^|/)protocols/(?!http/sseParser$)|${folders('extension', 'cli', 'test', 'bench')}`,
      ),
    },
  },
  {
    files: ['src/protocols/**/*.ts'],
    rules: {
      'no-restricted-imports': forbid(
        'doors import the runtime, never a backend or the editor (docs/architecture.md)',
        `^vscode$|${folders('backends', 'extension', 'cli', 'test', 'bench')}`,
      ),
    },
  },
  {
    files: ['webview-ui/src/**/*.ts'],
    rules: {
      'no-restricted-imports': forbid(
        'the webview bundle imports only its contract with the host and the runtime status table (docs/architecture.md)',
        `(^|/)src/(?!extension/webview/(protocol|eventLog)$|extension/views/overviewProtocol$|runtime/task$)`,
      ),
    },
  },
  {
    files: ['src/extension/**/*.ts'],
    rules: { 'no-restricted-imports': forbid('the editor imports no CLI and no test code (docs/architecture.md)', folders('cli', 'test', 'bench')) },
  },
);
