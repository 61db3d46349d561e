-- Replay's weights cache (docs/persist.md, "Replay and priorities"): per field, a
-- revision that grows with every commit changing that field of existing records
-- (PutFields, KV updates); field '' grows with every clear. A Queue's in-memory
-- weights stay valid while the revision it read is unchanged.
CREATE TABLE IF NOT EXISTS field_revisions(field TEXT PRIMARY KEY, n INTEGER NOT NULL);
-- Groups (docs/persist.md, "Groups"): groups dropped by GRPOGroupN's filter and
-- straggler bound or by DropGroup, and samples of over-sampled groups left unused.
INSERT OR IGNORE INTO meta(key, value) VALUES ('groups_dropped', 0), ('samples_unused', 0);
