// Which workspace files .gitignore leaves out, for the index's file listing (the editor's findFiles applies
// files.exclude but not .gitignore). Every .gitignore from the workspace folder down to a file's directory applies,
// each to paths relative to its own directory, as git reads them (rules of a deeper file are added after, so its `!`
// negations win). Parsing is the `ignore` package's (the .gitignore matcher eslint and others use). Files are read
// once per directory per listing; .git/ itself is always left out.
import * as fs from 'node:fs';
import * as path from 'node:path';
import ignore, { type Ignore } from 'ignore';

export class GitignoreFilter {
  private readonly byDir = new Map<string, Ignore | null>();

  /** `root`: the workspace folder (absolute). */
  constructor(private readonly root: string) {}

  /** `relPath`: '/'-separated, relative to the root. */
  ignores(relPath: string): boolean {
    const parts = relPath.split('/');
    if (parts.includes('.git')) return true;
    // Root first, deeper files after: the last file that decides (ignores, or re-includes with `!`) wins.
    let ignored = false;
    for (let depth = 0; depth < parts.length; depth++) {
      const rules = this.rulesOf(parts.slice(0, depth).join('/'));
      if (!rules) continue;
      const r = rules.test(parts.slice(depth).join('/'));
      if (r.ignored) ignored = true;
      else if (r.unignored) ignored = false;
    }
    return ignored;
  }

  private rulesOf(dir: string): Ignore | null {
    let rules = this.byDir.get(dir);
    if (rules === undefined) {
      rules = null;
      try {
        const text = fs.readFileSync(path.join(this.root, dir, '.gitignore'), 'utf8');
        rules = ignore().add(text);
      } catch {
        // no .gitignore here
      }
      this.byDir.set(dir, rules);
    }
    return rules;
  }
}
