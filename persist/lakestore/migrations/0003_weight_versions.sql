-- Weight versions, staleness and leased reads (docs/persist.md, "Weight versions,
-- staleness, back-pressure and leases"). The current weight version has a row of its
-- own, not a column of queues: a staleness-bounded GetMeta holds it FOR SHARE until it
-- commits (so SetVersion waits for hand-outs judged against the old version), which on
-- the queue's row would stall puts. Stale records dropped are counted per consumer, in
-- the row GetMeta already locks. Leases hold samples handed out to a task, unconsumed,
-- until they are committed or expire (on this database's clock).
CREATE TABLE weight_versions (
	queue   text   PRIMARY KEY,
	version bigint NOT NULL DEFAULT 0
);
ALTER TABLE consumers ADD COLUMN stale_dropped bigint NOT NULL DEFAULT 0;
CREATE TABLE leases (
	queue     text        NOT NULL,
	partition text        NOT NULL,
	task      text        NOT NULL,
	lo        bigint      NOT NULL,
	hi        bigint      NOT NULL,
	expires   timestamptz NOT NULL
);
CREATE INDEX leases_key ON leases (queue, partition, task, expires);
