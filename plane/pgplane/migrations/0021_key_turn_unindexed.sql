-- A keyed start rewrites its key's counter row in place (issue 27: burn-down with keys on
-- PostgreSQL). The claim's start (setRunningKeyed, 0013) advances the key's turn (pass) and
-- clears joined, and both were columns of concurrency_keys_ready (0012): every start wrote
-- a new row version with a new entry in the primary key and in the ready index (a non-HOT
-- update, its two index inserts and the dead entries the next descents walked), about 7 of
-- a keyed job's 21 WAL records. The ready index now holds only the ready keys of a queue,
-- without their turns, so a start that leaves the key ready (below its limit, with claimable
-- jobs left: every start but the one that fills the key or takes its last job) changes no
-- indexed column and is a HOT update, as an end's and a submit's have been since 0012.
--
-- The price: a claim's read of the keys whose turn it is (keyTurns, plane/pgplane/statements.go,
-- unchanged: ORDER BY pass, joined DESC LIMIT n FOR UPDATE SKIP LOCKED) reads every ready key
-- of its queue and sorts them (a top-n sort), O(ready keys of the queue) a claim round
-- instead of O(n): fine for hundreds of keys a queue (docs/benchmarks.md "PostgreSQL keyed
-- starts in place"). The order is the same, so fair share is unchanged.
--
-- The counting trigger read the current turn (the smallest pass of the ready keys) for
-- every change that adds a claimable row — every keyed submit — through that index; that
-- read would now cost O(ready keys) a submitted row. It is needed only when the key joins
-- the rotation (no row, or nothing claimable before): the function below first makes the
-- one update of a key that does not join (its row has claimable rows, or the change adds
-- none), whose WHERE is evaluated on the row's latest version under its lock, and reads the
-- turn only when that finds no row. The function is 0014's otherwise.
DROP INDEX {schema}.concurrency_keys_ready;
CREATE INDEX concurrency_keys_ready ON {schema}.concurrency_keys (namespace, queue) WHERE ready;

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
    -- The common case: the key's row exists and the change does not make it join (it had
    -- claimable rows, or the change adds none). 0014's update, whose first CASE is false here.
    UPDATE {schema}.concurrency_keys AS k SET
        pass = CASE WHEN was_claimable AND NEW.state = 1 THEN k.pass + 1.0 / k.weight ELSE k.pass END,
        joined = CASE WHEN was_claimable AND NEW.state = 1 THEN false ELSE k.joined END,
        queued = k.queued + dq,
        running = k.running + dr
    WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue AND k.concurrency_key = NEW.concurrency_key
        AND (dq <= 0 OR k.queued > 0)
    RETURNING k.queued, k.running INTO queued_after, running_after;
    IF NOT FOUND THEN
        IF dq > 0 THEN
            -- The current turn: the smallest pass of the ready keys; else of the keys with
            -- claimable rows (each at its limit); else the largest pass of the queue's keys.
            SELECT min(k.pass) INTO turn FROM {schema}.concurrency_keys k
                WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue AND k.ready;
            IF turn IS NULL THEN
                SELECT min(k.pass) INTO turn FROM {schema}.concurrency_keys k
                    WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue AND k.queued > 0;
            END IF;
            IF turn IS NULL THEN
                SELECT max(k.pass) INTO turn FROM {schema}.concurrency_keys k
                    WHERE k.namespace = NEW.namespace AND k.queue = NEW.queue;
            END IF;
        END IF;
        -- 0014's update and upsert: the key joins (or its row is missing, or a concurrent
        -- transaction changed it since the update above).
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
    END IF;
    IF (dq < 0 OR dr < 0) AND queued_after = 0 AND running_after = 0 THEN
        DELETE FROM {schema}.concurrency_keys WHERE namespace = NEW.namespace AND queue = NEW.queue
            AND concurrency_key = NEW.concurrency_key AND queued = 0 AND running = 0
            AND tokens < 0 AND next_ms = 0; -- 0014: a row with rate state is kept
    END IF;
    RETURN NULL;
END $$;
