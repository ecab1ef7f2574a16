// Lint: type-aware checks the compiler does not make. The two promise rules catch what hurt us (a `void
// this.serial(...)` that could reject unhandled; an async listener whose rejection nothing sees); the rest of
// typescript-eslint's recommended set keeps obvious mistakes out. Run by `npm run lint` (part of `npm test`).
import tseslint from 'typescript-eslint';

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
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] }] },
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
);
