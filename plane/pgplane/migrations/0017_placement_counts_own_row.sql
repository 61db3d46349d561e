-- A change of a shape's counter that finds every counter row of the shape held makes a row
-- numbered after its transaction alone, so it never waits (docs/semantics.md, "Placement";
-- TestShapedBatchesNoDeadlock).
--
-- 0016's trigger numbered that row 8 + txid % 32,752: transactions running at once never
-- share the number, but a row an older transaction made (32,752 transaction ids earlier, or
-- a multiple of that) carries it too, and when that row was held by another transaction
-- the trigger's INSERT … ON CONFLICT waited for it, inside the statement, holding the rows
-- the statement had written before: a wait another transaction's could close into a
-- deadlock. A database past 32,752 transactions (every one in service) has such rows.
-- The row is now numbered 8 + txid_current(), the transaction's id with its epoch (64 bits,
-- never reused): no other transaction makes that number, and none made it before, since
-- 0010's shards are 0–7 and 0016's numbers, 8 + (an older id) % 32,752, are at most 8 +
-- that older id, below 8 + this one. A row this transaction made is one it holds, which
-- the SKIP LOCKED read never skips, so the INSERT conflicts with no row at all (ON CONFLICT
-- is kept only as a guard). The shard column widens to bigint for it (placement_counts
-- holds a few rows per shape: the rewrite is short).
ALTER TABLE {schema}.placement_counts ALTER COLUMN shard TYPE bigint;

CREATE OR REPLACE FUNCTION {schema}.placement_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    dq bigint := 0;
    dr bigint := 0;
    ns text;
    q text;
    sh text;
    free tid;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        dq := dq - (OLD.state IN (0, -1, -3))::int;
        dr := dr - (OLD.state = 1)::int;
        ns := OLD.namespace; q := OLD.queue; sh := OLD.shape;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        dq := dq + (NEW.state IN (0, -1, -3))::int;
        dr := dr + (NEW.state = 1)::int;
        ns := NEW.namespace; q := NEW.queue; sh := NEW.shape;
    END IF;
    IF dq = 0 AND dr = 0 THEN
        RETURN NULL;
    END IF;
    -- A row no other transaction holds (one this transaction holds is never skipped).
    SELECT ctid INTO free FROM {schema}.placement_counts
        WHERE namespace = ns AND queue = q AND shape = sh
        ORDER BY shard LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF free IS NOT NULL THEN
        UPDATE {schema}.placement_counts SET queued = queued + dq, running = running + dr WHERE ctid = free;
        RETURN NULL;
    END IF;
    -- Every row held by another transaction, or none yet: a row numbered after this
    -- transaction alone.
    INSERT INTO {schema}.placement_counts AS c (namespace, queue, shape, shard, queued, running)
    VALUES (ns, q, sh, 8 + txid_current(), dq, dr)
    ON CONFLICT (namespace, queue, shape, shard) DO UPDATE SET
        queued = c.queued + excluded.queued, running = c.running + excluded.running;
    RETURN NULL;
END $$;
