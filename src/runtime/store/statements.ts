// Prepared sql.js statements, one per SQL text, kept for the store's lifetime: every write batch and read runs the
// same few statements, and preparing them again would cost more than running them.
import type { Database, Statement } from 'sql.js';

export class StatementCache {
  private readonly statements = new Map<string, Statement>();

  constructor(private readonly db: Database) {}

  get(sql: string): Statement {
    let st = this.statements.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      this.statements.set(sql, st);
    }
    return st;
  }

  /** Frees every statement (before the database closes). */
  free(): void {
    for (const st of this.statements.values()) st.free();
    this.statements.clear();
  }
}
