-- A key's rate state outlives its last job (issue 27, "Rate limits per key"; the same
-- change as SQLite's migration 017, docs/semantics.md).
--
-- A key's token bucket (tokens, tokens_ms) and its "slow down" hold (next_ms) are stored in
-- its counter row, which the function below deleted as soon as the key had nothing queued
-- or running. So a key whose jobs came one at a time found a full bucket each time, and a
-- worker's RateLimited(key, retry_after) for the key's only job was lost with the row,
-- letting the key's next job start at once. Now the function keeps a row that has drawn
-- from its bucket (tokens >= 0) or been held (next_ms > 0); the maintenance leader deletes
-- it once its bucket is full again and its hold has ended (planekit.DropSettledKeys,
-- plane.Admission.KeyRateSettled), and the hold's statement (keyHold) makes the row of a
-- key that has none. Such a row is not ready (queued = 0), so no claim reads it; a job of
-- the key that comes before maintenance drops it joins the rotation through it as through
-- a new row: at the current turn, not at the later of that and the pass the row kept (a key
-- with nothing queued or running has left the rotation; its rate state does not change its
-- place in it: conformance RateLimits/EmptiedKeyRejoinsAtTurn), so the row's pass counts
-- only while the key has a job running (passes are never negative). The function is 0012's
-- but for the DELETE and that join.
CREATE OR REPLACE FUNCTION {schema}.invocations_keyed_count() RETURNS trigger LANGUAGE plpgsql AS $$
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
        -- The current turn: the smallest pass of the ready keys; else of the keys with
        -- claimable rows (each at its limit); else the largest pass of the queue's keys.
        SELECT k.pass INTO turn FROM {schema}.concurrency_keys k
            WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue AND k.ready
            ORDER BY k.pass LIMIT 1;
        IF turn IS NULL THEN
            SELECT min(k.pass) INTO turn FROM {schema}.concurrency_keys k
                WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue AND k.queued > 0;
        END IF;
        IF turn IS NULL THEN
            SELECT max(k.pass) INTO turn FROM {schema}.concurrency_keys k
                WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue;
        END IF;
    END IF;
    -- The common case, an existing row: one update. A missing row (first use, or deleted by
    -- a concurrent transaction) is made by the upsert.
    UPDATE {schema}.concurrency_keys AS k SET
        pass = CASE WHEN k.queued = 0 AND dq > 0 THEN greatest(CASE WHEN k.running > 0 THEN k.pass ELSE 0 END, COALESCE(turn, k.pass))
            WHEN was_claimable AND NEW.state = 1 THEN k.pass + 1.0 / k.weight ELSE k.pass END,
        joined = CASE WHEN k.queued = 0 AND dq > 0 THEN true
            WHEN was_claimable AND NEW.state = 1 THEN false ELSE k.joined END,
        queued = k.queued + dq,
        running = k.running + dr
    WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue AND k.concurrency_key = NEW.concurrency_key
    RETURNING k.queued, k.running INTO queued_after, running_after;
    IF NOT FOUND THEN
        INSERT INTO {schema}.concurrency_keys AS k (namespace, queue, concurrency_key, queued, running, limit_n, weight, pass, joined)
        VALUES (NEW.namespace, NEW.queue, NEW.concurrency_key, greatest(dq, 0), greatest(dr, 0),
            COALESCE((SELECT l.limit_n FROM {schema}.concurrency_limits l WHERE l.namespace = NEW.namespace AND l.queue = NEW.queue AND l.concurrency_key = NEW.concurrency_key),
                     (SELECT l.limit_n FROM {schema}.concurrency_limits l WHERE l.namespace = NEW.namespace AND l.queue = NEW.queue AND l.concurrency_key = ''),
                     4611686018427387904),
            COALESCE((SELECT l.weight FROM {schema}.concurrency_limits l WHERE l.namespace = NEW.namespace AND l.queue = NEW.queue AND l.concurrency_key = NEW.concurrency_key), 1),
            COALESCE(turn, 0), dq > 0)
        ON CONFLICT (namespace, queue, concurrency_key) DO UPDATE SET
            pass = CASE WHEN k.queued = 0 AND dq > 0 THEN greatest(CASE WHEN k.running > 0 THEN k.pass ELSE 0 END, COALESCE(turn, k.pass)) ELSE k.pass END,
            joined = CASE WHEN k.queued = 0 AND dq > 0 THEN true ELSE k.joined END,
            queued = k.queued + dq,
            running = k.running + dr;
    END IF;
    IF (dq < 0 OR dr < 0) AND queued_after = 0 AND running_after = 0 THEN
        DELETE FROM {schema}.concurrency_keys WHERE namespace = NEW.namespace AND queue = NEW.queue
            AND concurrency_key = NEW.concurrency_key AND queued = 0 AND running = 0
            AND tokens < 0 AND next_ms = 0; -- 0014: a row with rate state is kept
    END IF;
    RETURN NULL;
END $$;

-- The rows with rate state are indexed, as on SQLite (017), so that maintenance's look for
-- settled rows (planekit.DropSettledKeys) reads only them, not the row of every key with
-- work (a scan of 100,000 keys' rows cost the leader 35 ms a pass). The predicate names only
-- the rate columns, which a queue without key rate limits or holds never writes, so its
-- counter updates stay as they were (an end's, which changes only the counts, still HOT).
CREATE INDEX concurrency_keys_kept ON {schema}.concurrency_keys (namespace, queue, concurrency_key) WHERE tokens >= 0 OR next_ms > 0;
