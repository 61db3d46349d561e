-- The tables of meta.db, the file store's catalog (docs/persist.md describes them).
-- Every statement is idempotent: queues created before migrations were numbered
-- (PRAGMA user_version 0) already hold these tables.
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES ('format', 1), ('next_index', 0), ('manifest_version', 0),
  ('schema_version', 0), ('tail_rows', 0), ('tomb_version', 0), ('held_backfilled', 0);
CREATE TABLE IF NOT EXISTS fields(pos INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, kind TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tail(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  kind INTEGER NOT NULL,            -- 0 new rows lo..lo+n-1, 1 fields for the indexes in idx
  partition TEXT NOT NULL,
  lo INTEGER NOT NULL, n INTEGER NOT NULL,
  min_idx INTEGER NOT NULL, max_idx INTEGER NOT NULL,
  idx BLOB, data BLOB NOT NULL,
  flush_id INTEGER                  -- the pending fragment that is flushing this entry
);
CREATE INDEX IF NOT EXISTS tail_flush ON tail(flush_id);
CREATE TABLE IF NOT EXISTS fragments(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  file TEXT NOT NULL UNIQUE,
  kind INTEGER NOT NULL,            -- 0 rows, 1 fields
  state INTEGER NOT NULL,           -- 0 pending, 1 live, 2 removed
  owner TEXT NOT NULL,              -- process token that wrote it (pending only matters)
  min_idx INTEGER NOT NULL DEFAULT 0, max_idx INTEGER NOT NULL DEFAULT -1,
  rows INTEGER NOT NULL DEFAULT 0, bytes INTEGER NOT NULL DEFAULT 0,
  fields TEXT NOT NULL DEFAULT '',  -- field names, \x1f-separated
  level INTEGER NOT NULL DEFAULT 0, -- 0 written by flush, n+1 by compacting level n
  added_version INTEGER, removed_version INTEGER,
  claim_id INTEGER                  -- the pending compaction output replacing this fragment
);
CREATE INDEX IF NOT EXISTS fragments_state ON fragments(state, min_idx);
CREATE TABLE IF NOT EXISTS fieldsets(id INTEGER PRIMARY KEY, fields TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS segments(lo INTEGER PRIMARY KEY, hi INTEGER NOT NULL, partition TEXT NOT NULL, fieldset INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS segments_partition ON segments(partition, lo);
CREATE TABLE IF NOT EXISTS produced(field TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL, PRIMARY KEY(field, lo));
CREATE TABLE IF NOT EXISTS tombstones(lo INTEGER PRIMARY KEY, hi INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS consumed(partition TEXT NOT NULL, task TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
  PRIMARY KEY(partition, task, lo));
CREATE TABLE IF NOT EXISTS assignments(partition TEXT NOT NULL, task TEXT NOT NULL, dp_rank INTEGER NOT NULL,
  batch_index INTEGER NOT NULL, indexes BLOB NOT NULL, PRIMARY KEY(partition, task, dp_rank, batch_index));
-- held: the union of the stored sampler assignments of (partition, task), as spans, so
-- that a new assignment skips indexes another data-parallel group holds.
CREATE TABLE IF NOT EXISTS held(partition TEXT NOT NULL, task TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
  PRIMARY KEY(partition, task, lo));
-- big_int_fields: int64 fields holding integers beyond ±2^53, never widened to float64.
CREATE TABLE IF NOT EXISTS big_int_fields(field TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS kv(partition TEXT NOT NULL, key TEXT NOT NULL, idx INTEGER NOT NULL, tags TEXT NOT NULL,
  PRIMARY KEY(partition, key));
CREATE INDEX IF NOT EXISTS kv_idx ON kv(idx);
