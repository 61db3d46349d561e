-- The catalog of the distributed data store: every table is keyed by queue, and every
-- counter lives in the queue's own row (no global snapshot counter), so writers of
-- different queues never contend.

CREATE TABLE queues (
	queue            text PRIMARY KEY,
	next_index       bigint NOT NULL DEFAULT 0,    -- the index the next put gets
	next_seq         bigint NOT NULL DEFAULT 1,    -- the sequence of the next tail entry
	schema_version   bigint NOT NULL DEFAULT 0,    -- grows with every schema change
	schema           jsonb  NOT NULL DEFAULT '[]', -- [{"name":…,"kind":…}], oldest first
	big_int_fields   text[] NOT NULL DEFAULT '{}', -- int64 fields holding an integer beyond ±2^53
	manifest_version bigint NOT NULL DEFAULT 0,    -- grows with every published fragment
	change_version   bigint NOT NULL DEFAULT 0,    -- grows with every commit a read may see
	created_at       timestamptz NOT NULL DEFAULT now()
);

-- Which partition each index belongs to and which fields its own record had; adjacent
-- puts with the same partition and fields extend one segment.
CREATE TABLE segments (
	queue     text   NOT NULL,
	lo        bigint NOT NULL,
	hi        bigint NOT NULL,
	partition text   NOT NULL,
	fields    text[] NOT NULL,
	PRIMARY KEY (queue, lo)
);
CREATE INDEX segments_partition ON segments (queue, partition, lo);

-- The durable tail: puts (kind 0, samples lo..lo+n-1) and field updates (kind 1, targets
-- in idx) not yet in a fragment, encoded as persist.PreparedRecords.Encoded.
CREATE TABLE tail (
	queue     text     NOT NULL,
	seq       bigint   NOT NULL,
	kind      smallint NOT NULL,
	partition text     NOT NULL,
	lo        bigint   NOT NULL,
	n         integer  NOT NULL,
	min_idx   bigint   NOT NULL,
	max_idx   bigint   NOT NULL,
	idx       bigint[],
	data      bytea    NOT NULL,
	PRIMARY KEY (queue, seq)
);
CREATE INDEX tail_range ON tail (queue, min_idx);

-- Published Parquet fragments (objects in the blob bucket, immutable).
CREATE TABLE fragments (
	queue        text     NOT NULL,
	object       text     NOT NULL,
	kind         smallint NOT NULL,  -- 0 rows, 1 field updates
	min_idx      bigint   NOT NULL,
	max_idx      bigint   NOT NULL,
	rows         bigint   NOT NULL,
	bytes        bigint   NOT NULL,
	fields       text[]   NOT NULL,
	added_version bigint  NOT NULL,
	created_at   timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (queue, object)
);
CREATE INDEX fragments_range ON fragments (queue, min_idx);

-- Production added later (PutFields, KV updates), as spans per field.
CREATE TABLE produced (
	queue text   NOT NULL,
	field text   NOT NULL,
	lo    bigint NOT NULL,
	hi    bigint NOT NULL
);
CREATE INDEX produced_field ON produced (queue, field, lo);

-- One row per (partition, task) that ever consumed: GetMeta and MarkConsumed lock it,
-- so that decisions about one consumer are serialized across every server.
CREATE TABLE consumers (
	queue     text NOT NULL,
	partition text NOT NULL,
	task      text NOT NULL,
	PRIMARY KEY (queue, partition, task)
);

-- Consumption, as disjoint spans per (partition, task).
CREATE TABLE consumed (
	queue     text   NOT NULL,
	partition text   NOT NULL,
	task      text   NOT NULL,
	lo        bigint NOT NULL,
	hi        bigint NOT NULL
);
CREATE INDEX consumed_key ON consumed (queue, partition, task, lo);

-- Sampler assignments (RankAware and custom samplers) and the spans they hold.
CREATE TABLE assignments (
	queue       text     NOT NULL,
	partition   text     NOT NULL,
	task        text     NOT NULL,
	dp_rank     integer  NOT NULL,
	batch_index integer  NOT NULL,
	indexes     bigint[] NOT NULL,
	PRIMARY KEY (queue, partition, task, dp_rank, batch_index)
);
CREATE TABLE held (
	queue     text   NOT NULL,
	partition text   NOT NULL,
	task      text   NOT NULL,
	lo        bigint NOT NULL,
	hi        bigint NOT NULL
);
CREATE INDEX held_key ON held (queue, partition, task, lo);

-- KV keys, their index and tags.
CREATE TABLE kv (
	queue     text   NOT NULL,
	partition text   NOT NULL,
	key       text   NOT NULL,
	idx       bigint NOT NULL,
	tags      jsonb  NOT NULL DEFAULT '{}',
	PRIMARY KEY (queue, partition, key)
);
CREATE INDEX kv_idx ON kv (queue, idx);

-- Cleared indexes, as disjoint spans.
CREATE TABLE tombstones (
	queue text   NOT NULL,
	lo    bigint NOT NULL,
	hi    bigint NOT NULL
);
CREATE INDEX tombstones_key ON tombstones (queue, lo);
