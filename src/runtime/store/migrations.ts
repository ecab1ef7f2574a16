// Numbered schema migrations. Each runs once, in order, inside its own transaction; the applied version is kept
// in meta.schema_version. Never edit a released migration: add the next one.
import type { Database } from 'sql.js';

export const MIGRATIONS: readonly string[] = [
  // 1: tasks, their event log, idempotency keys
  `CREATE TABLE tasks (
     id TEXT PRIMARY KEY,
     response_id TEXT NOT NULL UNIQUE,
     origin TEXT NOT NULL,
     principal TEXT NOT NULL,
     title TEXT NOT NULL,
     model TEXT NOT NULL,
     input_json TEXT NOT NULL,
     status TEXT NOT NULL,
     status_message TEXT,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     on_restart TEXT NOT NULL,
     attempt INTEGER NOT NULL,
     ttl_ms INTEGER,
     expires_at INTEGER,
     deadline_at INTEGER,
     response_json TEXT,
     error_json TEXT,
     usage_json TEXT,
     output_tokens INTEGER NOT NULL DEFAULT 0,
     meta_json TEXT NOT NULL,
     next_seq INTEGER NOT NULL,
     oldest_seq INTEGER NOT NULL DEFAULT 0,
     queue_order INTEGER NOT NULL,
     snapshot_json TEXT
   );
   CREATE INDEX tasks_by_status ON tasks(status, queue_order);
   CREATE INDEX tasks_by_created ON tasks(created_at DESC, id DESC);
   CREATE INDEX tasks_by_principal ON tasks(principal, created_at DESC, id DESC);
   CREATE INDEX tasks_by_expiry ON tasks(expires_at) WHERE expires_at IS NOT NULL;
   CREATE INDEX tasks_by_updated ON tasks(updated_at);
   CREATE TABLE events (
     task_id TEXT NOT NULL,
     seq INTEGER NOT NULL,
     type TEXT NOT NULL,
     data_json TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     PRIMARY KEY (task_id, seq)
   ) WITHOUT ROWID;
   CREATE TABLE idempotency_keys (
     principal TEXT NOT NULL,
     scope TEXT NOT NULL,
     key TEXT NOT NULL,
     fingerprint TEXT NOT NULL,
     task_id TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     PRIMARY KEY (principal, scope, key)
   ) WITHOUT ROWID;
   CREATE INDEX idempotency_by_created ON idempotency_keys(created_at);`,
  // 2: input rounds of a task that asks its client for input (MCP input_required): a JSON array (runtime/input.ts)
  `ALTER TABLE tasks ADD COLUMN input_rounds_json TEXT;`,
  // 3: a task's priority among its principal's queued tasks (runtime/queue.ts)
  `ALTER TABLE tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;`,
  // 4: the completion-webhook outbox (runtime/webhooks.ts): one row per event still to be delivered, written in the
  // batch of the task's terminal transition; the body is stored as sent, so every try carries the same bytes and id
  `CREATE TABLE webhook_deliveries (
     id TEXT PRIMARY KEY,
     task_id TEXT NOT NULL,
     principal TEXT NOT NULL,
     event_type TEXT NOT NULL,
     body TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     attempts INTEGER NOT NULL DEFAULT 0,
     next_attempt_at INTEGER NOT NULL
   ) WITHOUT ROWID;
   CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at);`,
  // 5: the Batch API (runtime/batches): uploaded files (their bytes live in files/ beside the store), batch jobs, and
  // one work item per request line (its place in the input file; its output line once it ended)
  `CREATE TABLE files (
     id TEXT PRIMARY KEY,
     principal TEXT NOT NULL,
     purpose TEXT NOT NULL,
     filename TEXT NOT NULL,
     bytes INTEGER NOT NULL,
     created_at INTEGER NOT NULL
   ) WITHOUT ROWID;
   CREATE INDEX files_by_principal ON files(principal, created_at, id);
   CREATE TABLE batches (
     id TEXT PRIMARY KEY,
     principal TEXT NOT NULL,
     endpoint TEXT NOT NULL,
     input_file_id TEXT NOT NULL,
     completion_window TEXT NOT NULL,
     status TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     expires_at INTEGER NOT NULL,
     moments_json TEXT NOT NULL,
     output_file_id TEXT,
     error_file_id TEXT,
     errors_json TEXT,
     metadata_json TEXT,
     total INTEGER NOT NULL,
     completed INTEGER NOT NULL,
     failed INTEGER NOT NULL,
     input_tokens INTEGER NOT NULL,
     output_tokens INTEGER NOT NULL
   ) WITHOUT ROWID;
   CREATE INDEX batches_by_principal ON batches(principal, created_at, id);
   CREATE INDEX batches_by_status ON batches(status);
   CREATE TABLE batch_items (
     batch_id TEXT NOT NULL,
     idx INTEGER NOT NULL,
     custom_id TEXT NOT NULL,
     line_offset INTEGER NOT NULL,
     line_bytes INTEGER NOT NULL,
     status TEXT NOT NULL,
     output_json TEXT,
     PRIMARY KEY (batch_id, idx)
   ) WITHOUT ROWID;`,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * Brings `db` to SCHEMA_VERSION and returns the version it had. A store written by a newer release is refused
 * (nothing is changed: the caller has not written anything yet).
 */
export function migrate(db: Database): number {
  db.exec(`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
           INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '0'), ('journal_seq', '0');`);
  const current = Number(db.exec("SELECT value FROM meta WHERE key = 'schema_version'")[0].values[0][0]);
  if (current > MIGRATIONS.length) {
    throw new Error(
      `The task store was written by a newer release of Task Runtime (store schema ${current}; this release reads up to ${MIGRATIONS.length}). ` +
        'It was left as it is: run the newer release, or move the store aside to start empty.',
    );
  }
  for (let v = current; v < MIGRATIONS.length; v++) {
    db.exec('BEGIN');
    try {
      db.exec(MIGRATIONS[v]);
      db.run("UPDATE meta SET value = ? WHERE key = 'schema_version'", [String(v + 1)]);
      db.exec('COMMIT');
    } catch (e) {
      db.exec('ROLLBACK');
      throw e;
    }
  }
  return current;
}
