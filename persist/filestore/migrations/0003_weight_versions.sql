-- Weight versions, staleness and leased reads (docs/persist.md, "Weight versions,
-- staleness, back-pressure and leases"): the queue's current weight version and the
-- count of stale records dropped by staleness-bounded reads, and the leases of
-- samples handed out to a task without being consumed (expires: Unix nanoseconds).
INSERT OR IGNORE INTO meta(key, value) VALUES ('weight_version', 0), ('stale_dropped', 0);
CREATE TABLE IF NOT EXISTS leases(partition TEXT NOT NULL, task TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
  expires INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS leases_task ON leases(partition, task, expires);
