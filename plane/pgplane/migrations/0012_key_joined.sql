-- Fair share: a key that joins the rotation goes first on a tie, and a key that joins while
-- no key is ready gets no credit for the others' history (issue 27; the same change as
-- SQLite's migration 015, docs/semantics.md "Concurrency keys and fair share").
--
-- A key joins at the current turn, the smallest pass of the ready keys; a tie with that key
-- went in no defined order (the ready index ends at pass), so a tenant that came back could
-- wait one more claim of the key with the backlog. joined marks a key that joined since its
-- last claim (set when it gets a claimable row with none before, cleared by its claim, which
-- writes the row anyway) and orders the ready index after pass: such a key takes the next
-- claim at its turn, and no write is added. When no key was ready (every key with rows at
-- its limit, or with nothing claimable), a new key joined at pass 0, ahead of every other
-- key by all the claims they had made, and a returning key whose row was kept (a row
-- running) kept its own pass however far behind. The turn is now, for both: the smallest
-- pass of the ready keys; else of the keys with claimable rows (each at its limit); else the
-- largest pass of the queue's keys (a pass that stopped while others claimed gives no
-- credit). With no ready key, every row read holds a running row.
--
-- And a key's row is updated in place (HOT) when a job of the key is submitted or ends
-- without changing whether the key is ready: ready is a stored column and the ready
-- index's only predicate, so the counts that change (queued, running) are in no index.
-- Before, the index's predicate named them, so every counter update wrote a new entry in
-- the primary key and the ready index (issue 27: burn-down with keys). The function is
-- 0011's otherwise, its turn read through the same predicate.
ALTER TABLE {schema}.concurrency_keys ADD COLUMN joined boolean NOT NULL DEFAULT false,
    ADD COLUMN ready boolean GENERATED ALWAYS AS (queued > 0 AND running < limit_n) STORED;
DROP INDEX {schema}.concurrency_keys_ready;
CREATE INDEX concurrency_keys_ready ON {schema}.concurrency_keys (namespace, queue, pass, joined DESC) WHERE ready;

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
        pass = CASE WHEN k.queued = 0 AND dq > 0 THEN greatest(k.pass, COALESCE(turn, k.pass))
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
            pass = CASE WHEN k.queued = 0 AND dq > 0 THEN greatest(k.pass, COALESCE(turn, k.pass)) ELSE k.pass END,
            joined = CASE WHEN k.queued = 0 AND dq > 0 THEN true ELSE k.joined END,
            queued = k.queued + dq,
            running = k.running + dr;
    END IF;
    IF (dq < 0 OR dr < 0) AND queued_after = 0 AND running_after = 0 THEN
        DELETE FROM {schema}.concurrency_keys WHERE namespace = NEW.namespace AND queue = NEW.queue
            AND concurrency_key = NEW.concurrency_key AND queued = 0 AND running = 0;
    END IF;
    RETURN NULL;
END $$;
