-- A keyed claim advances its key's fair-share turn in the counter update its trigger makes
-- (issue 27: burn-down with keys). Migration 0007's invocations_keyed_count updated the
-- key's row when a keyed row started (state -2 to 1), and the claim then updated the same
-- row again to add 1/weight to its pass (keyAdvance): two row versions per claim, both
-- moving the row's entry in concurrency_keys_ready. The trigger now adds 1/weight itself
-- when a claimable row starts; the claim writes the key's row again only to store the
-- token bucket of a key under a rate limit. The function is 0007's otherwise.
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
        SELECT k.pass INTO turn FROM {schema}.concurrency_keys k
            WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue AND k.queued > 0 AND k.running < k.limit_n
            ORDER BY k.pass LIMIT 1;
    END IF;
    -- The common case, an existing row: one update. A missing row (first use, or deleted by
    -- a concurrent transaction) is made by the upsert.
    UPDATE {schema}.concurrency_keys AS k SET
        pass = CASE WHEN k.queued = 0 AND dq > 0 THEN greatest(k.pass, COALESCE(turn, k.pass))
            WHEN was_claimable AND NEW.state = 1 THEN k.pass + 1.0 / k.weight ELSE k.pass END,
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
