-- Concurrency keys, their limits and fair share (issue 27; plane/concurrency.go,
-- docs/semantics.md "Concurrency keys and fair share"). The same design as SQLite's
-- migration 009:
--
-- A claimable row with a concurrency key is stored in state -2 (planekit.StateKeyed; every
-- read reports it as queued), so the claim indexes of unkeyed jobs never hold it and an
-- unkeyed claim costs what it cost before. concurrency_keys keeps one row per (queue, key):
-- its claimable (queued) and running counts, limit, weight, pass (the fair-share turn),
-- token bucket (tokens < 0: full) and next_ms, before which no claim takes from it.
-- A keyed claim locks the ready key whose turn it is (FOR UPDATE SKIP LOCKED on
-- concurrency_keys_ready, which holds only keys with claimable rows below their limit), so
-- two claimers never start the same key's last slot, and a saturated key's rows are never
-- read. The trigger below keeps the counters in the statement of every change of a keyed
-- row's state, whichever code path makes it.
ALTER TABLE {schema}.invocations ADD COLUMN concurrency_key text;

CREATE INDEX invocations_keyed ON {schema}.invocations (namespace, queue, concurrency_key, id) WHERE state = -2;
CREATE INDEX invocations_keyed_priority ON {schema}.invocations (namespace, queue, concurrency_key, priority DESC, id) WHERE state = -2;
CREATE INDEX invocations_keyed_deadline ON {schema}.invocations (deadline_ms) WHERE state = -2 AND deadline_ms > 0;

-- The stored limits of a queue's admission block: key '' is the default of every key
-- without an override; limit_n is plane.ConcurrencyUnlimited for no limit.
CREATE TABLE {schema}.concurrency_limits (
    namespace       text             NOT NULL,
    queue           text             NOT NULL,
    concurrency_key text             NOT NULL,
    limit_n         bigint           NOT NULL,
    weight          double precision NOT NULL,
    PRIMARY KEY (namespace, queue, concurrency_key)
);

CREATE TABLE {schema}.concurrency_keys (
    namespace       text             NOT NULL,
    queue           text             NOT NULL,
    concurrency_key text             NOT NULL,
    queued          bigint           NOT NULL DEFAULT 0,
    running         bigint           NOT NULL DEFAULT 0,
    limit_n         bigint           NOT NULL,
    weight          double precision NOT NULL,
    pass            double precision NOT NULL DEFAULT 0,
    tokens          double precision NOT NULL DEFAULT -1,
    tokens_ms       bigint           NOT NULL DEFAULT 0,
    next_ms         bigint           NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, queue, concurrency_key)
) WITH (fillfactor = 50);
CREATE INDEX concurrency_keys_ready ON {schema}.concurrency_keys (namespace, queue, pass) WHERE queued > 0 AND running < limit_n;

-- invocations_keyed_state moves a keyed row that becomes claimable (state 0, not waiting)
-- to -2, before it is written. invocations_keyed_count then counts the change in its key's
-- row (after the write: a submit's insert that ON CONFLICT skips counts nothing), made on
-- first use (at the current turn: the smallest pass of the ready keys) with the limit and
-- weight of concurrency_limits; a key left with nothing claimable or running drops its
-- row. The counter change is an update of the existing row, or (none found: first use, or
-- deleted by a concurrent transaction) an upsert, so it lands whatever a concurrent
-- transaction did to the row.
CREATE FUNCTION {schema}.invocations_keyed_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 0 AND NOT NEW.waiting THEN
        NEW.state := -2;
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION {schema}.invocations_keyed_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was_claimable boolean := false;
    was_running   boolean := false;
    dq bigint;
    dr bigint;
    turn double precision;
    queued_after bigint := 1;
    running_after bigint := 1;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        was_claimable := OLD.state = -2;
        was_running := OLD.state = 1;
    END IF;
    dq := (NEW.state = -2)::int - was_claimable::int;
    dr := (NEW.state = 1)::int - was_running::int;
    IF dq = 0 AND dr = 0 THEN
        RETURN NULL;
    END IF;
    IF dq > 0 THEN
        SELECT k.pass INTO turn FROM {schema}.concurrency_keys k
            WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue AND k.queued > 0 AND k.running < k.limit_n
            ORDER BY k.pass LIMIT 1;
    END IF;
    -- The common case, an existing row: one update. A missing row (first use, or deleted by
    -- a concurrent transaction) is made by the upsert.
    UPDATE {schema}.concurrency_keys AS k SET
        pass = CASE WHEN k.queued = 0 AND dq > 0 THEN greatest(k.pass, COALESCE(turn, k.pass)) ELSE k.pass END,
        queued = k.queued + dq,
        running = k.running + dr
    WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue AND k.concurrency_key = NEW.concurrency_key
    RETURNING k.queued, k.running INTO queued_after, running_after;
    IF NOT FOUND THEN
        INSERT INTO {schema}.concurrency_keys AS k (namespace, queue, concurrency_key, queued, running, limit_n, weight, pass)
        VALUES (NEW.namespace, NEW.queue, NEW.concurrency_key, greatest(dq, 0), greatest(dr, 0),
            COALESCE((SELECT l.limit_n FROM {schema}.concurrency_limits l WHERE l.namespace = NEW.namespace AND l.queue = NEW.queue AND l.concurrency_key = NEW.concurrency_key),
                     (SELECT l.limit_n FROM {schema}.concurrency_limits l WHERE l.namespace = NEW.namespace AND l.queue = NEW.queue AND l.concurrency_key = ''),
                     4611686018427387904),
            COALESCE((SELECT l.weight FROM {schema}.concurrency_limits l WHERE l.namespace = NEW.namespace AND l.queue = NEW.queue AND l.concurrency_key = NEW.concurrency_key), 1),
            COALESCE(turn, 0))
        ON CONFLICT (namespace, queue, concurrency_key) DO UPDATE SET
            pass = CASE WHEN k.queued = 0 AND dq > 0 THEN greatest(k.pass, COALESCE(turn, k.pass)) ELSE k.pass END,
            queued = k.queued + dq,
            running = k.running + dr;
    END IF;
    IF (dq < 0 OR dr < 0) AND queued_after = 0 AND running_after = 0 THEN
        DELETE FROM {schema}.concurrency_keys WHERE namespace = NEW.namespace AND queue = NEW.queue
            AND concurrency_key = NEW.concurrency_key AND queued = 0 AND running = 0;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER invocations_keyed_state BEFORE INSERT OR UPDATE OF state, waiting ON {schema}.invocations
    FOR EACH ROW WHEN (NEW.concurrency_key IS NOT NULL) EXECUTE FUNCTION {schema}.invocations_keyed_state();
CREATE TRIGGER invocations_keyed_count AFTER INSERT OR UPDATE OF state, waiting ON {schema}.invocations
    FOR EACH ROW WHEN (NEW.concurrency_key IS NOT NULL) EXECUTE FUNCTION {schema}.invocations_keyed_count();

ALTER TABLE {schema}.queues ADD COLUMN concurrency bytea;
