-- A change of a shape's counter never waits on a counter row another transaction holds
-- (docs/semantics.md, "Placement"; TestShapedBatchesNoDeadlock).
--
-- 0010's trigger added each change to the shard row (txid % 8) of the transaction, waiting
-- for whoever held it, one row at a time in the order the statement wrote the invocations.
-- Two transactions on one shard changing two shapes in opposite orders (batches of several
-- shapes, a settle of some shapes and then a claim of others in one transaction) each held
-- one row the other waited for: a deadlock, broken after deadlock_timeout (1 s) and run
-- again (20 in TestShapedBatchesNoDeadlock). Ordering cannot prevent it: a
-- settle-and-claim changes the shapes of its settles before it knows those of its claims.
-- So the trigger now takes a row of the shape that no other transaction holds (FOR UPDATE
-- SKIP LOCKED, the lowest shard first; a row this transaction holds is never skipped, so
-- it keeps to its row while no lower one frees), as claims take concurrency keys. When
-- every row of the shape is held (or it has none yet) it makes a row of its own, numbered
-- 8 + its transaction id mod 32,752: transactions running at once have ids closer than
-- that, so none shares the number, and it waits only in the rare case that an older row
-- has that number and is held. So a shape has about as many rows as transactions ever
-- changed it at once (never deleted; 0010's shards 0–7 are kept), and a read sums them as
-- before.
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
    -- Every row held by another transaction, or none yet: a row of this transaction's own.
    INSERT INTO {schema}.placement_counts AS c (namespace, queue, shape, shard, queued, running)
    VALUES (ns, q, sh, (8 + txid_current() % 32752)::smallint, dq, dr)
    ON CONFLICT (namespace, queue, shape, shard) DO UPDATE SET
        queued = c.queued + excluded.queued, running = c.running + excluded.running;
    RETURN NULL;
END $$;
