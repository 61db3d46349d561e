-- Replay's weights cache (docs/persist.md, "Replay and priorities"): per queue and
-- field, a revision that grows with every commit changing that field of existing
-- records (PutFields, KV updates); field '' grows with every clear. A Queue's
-- in-memory weights stay valid while the revision it read is unchanged. Written with
-- the queue's row locked (as the changes it counts are).
CREATE TABLE field_revisions (
	queue text   NOT NULL,
	field text   NOT NULL,
	n     bigint NOT NULL,
	PRIMARY KEY (queue, field)
);

-- Groups (docs/persist.md, "Groups"): per consumer, the groups dropped by
-- GRPOGroupN's filter and straggler bound or by DropGroup, and the samples of
-- over-sampled groups left unused, in the row GetMeta already locks.
ALTER TABLE consumers ADD COLUMN groups_dropped bigint NOT NULL DEFAULT 0;
ALTER TABLE consumers ADD COLUMN samples_unused bigint NOT NULL DEFAULT 0;
