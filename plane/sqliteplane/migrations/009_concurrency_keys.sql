-- Concurrency keys, their limits and fair share (issue 27; plane/concurrency.go,
-- docs/semantics.md "Concurrency keys and fair share").
--
-- An invocation may carry a concurrency key. Claimable keyed rows are stored in state -2
-- (planekit.StateKeyed; every read reports them as queued), so the claim indexes of unkeyed
-- jobs (invocations_queue's state 0 range, invocations_priority) never hold them and an
-- unkeyed claim costs what it cost before. A keyed claim reaches them through their key:
-- concurrency_keys keeps one row per (queue, key) with how many of its rows are claimable
-- (queued) and running, its limit and weight, its pass (the fair-share turn: the
-- smallest pass goes first, each claim adds 1/weight), its token bucket under the queue's
-- key_rate_limit (tokens < 0: full) and next_ms, before which no claim takes from it (its
-- bucket is empty, or a worker answered "rate limited" for it). A claim picks from
-- concurrency_keys_ready, which holds only the keys with claimable rows below their limit:
-- a saturated key's rows are never read, however many there are.
--
-- The triggers below keep the counters in the same statement as every change of a keyed
-- row's state (submit, claim, ack, nack, retry, cancel, kill, lease expiry, deadline,
-- promotion of a delayed row), whichever code path makes it, and move a keyed row that
-- becomes claimable (state 0) to state -2. Rows without a key pay one WHEN test.
ALTER TABLE invocations ADD COLUMN concurrency_key TEXT;

-- A key's claimable rows in the order of each claim kind.
CREATE INDEX invocations_keyed ON invocations (namespace, queue, concurrency_key, id) WHERE state = -2;
CREATE INDEX invocations_keyed_priority ON invocations (namespace, queue, concurrency_key, priority DESC, id) WHERE state = -2;
-- Deadlines of claimable keyed rows (invocations_deadline holds state 0 only).
CREATE INDEX invocations_keyed_deadline ON invocations (deadline_ms) WHERE state = -2 AND deadline_ms > 0;

-- The stored limits of a queue's admission block: key '' is the default of every key
-- without an override. limit_n is plane.ConcurrencyUnlimited for no limit.
CREATE TABLE concurrency_limits (
    namespace       TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    concurrency_key TEXT    NOT NULL,
    limit_n         INTEGER NOT NULL,
    weight          REAL    NOT NULL,
    PRIMARY KEY (namespace, queue, concurrency_key)
) WITHOUT ROWID;

CREATE TABLE concurrency_keys (
    namespace       TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    concurrency_key TEXT    NOT NULL,
    queued          INTEGER NOT NULL DEFAULT 0,
    running         INTEGER NOT NULL DEFAULT 0,
    limit_n         INTEGER NOT NULL,
    weight          REAL    NOT NULL,
    pass            REAL    NOT NULL DEFAULT 0,
    tokens          REAL    NOT NULL DEFAULT -1,
    tokens_ms       INTEGER NOT NULL DEFAULT 0,
    next_ms         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, queue, concurrency_key)
) WITHOUT ROWID;
CREATE INDEX concurrency_keys_ready ON concurrency_keys (namespace, queue, pass) WHERE queued > 0 AND running < limit_n;

-- A new keyed row: make its key's counter row (limit and weight from concurrency_limits; a
-- new key's pass is the smallest pass of the ready keys, so it joins the rotation at its
-- current turn instead of ahead of every key), then count it.
CREATE TRIGGER invocations_keyed_insert AFTER INSERT ON invocations
WHEN new.concurrency_key IS NOT NULL
BEGIN
    INSERT INTO concurrency_keys (namespace, queue, concurrency_key, limit_n, weight, pass)
    VALUES (new.namespace, new.queue, new.concurrency_key,
        COALESCE((SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key),
                 (SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = ''),
                 4611686018427387904),
        COALESCE((SELECT weight FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key), 1),
        COALESCE((SELECT pass FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
                  AND queued > 0 AND running < limit_n ORDER BY pass LIMIT 1), 0))
    ON CONFLICT (namespace, queue, concurrency_key) DO NOTHING;
    UPDATE concurrency_keys SET
        pass = CASE WHEN queued = 0 AND new.state = 0 THEN max(pass, COALESCE((SELECT k.pass FROM concurrency_keys k
            WHERE k.namespace = new.namespace AND k.queue = new.queue AND k.queued > 0 AND k.running < k.limit_n
            ORDER BY k.pass LIMIT 1), pass)) ELSE pass END,
        queued = queued + (new.state IN (0, -2)),
        running = running + (new.state = 1)
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
    UPDATE invocations SET state = -2 WHERE seq = new.seq AND new.state = 0;
END;

-- A keyed row changes state: count the change (state 0 and -2 are both claimable), and
-- move a row that became claimable to -2. A key left with nothing claimable or running
-- drops its counter row; a row that becomes claimable or running makes it again (at the
-- current turn), as a submit does. ("WHERE … AND true" keeps SQLite's parser from reading
-- ON CONFLICT as a join constraint of the INSERT's SELECT.)
CREATE TRIGGER invocations_keyed_state AFTER UPDATE OF state ON invocations
WHEN new.concurrency_key IS NOT NULL AND old.state <> new.state
BEGIN
    INSERT INTO concurrency_keys (namespace, queue, concurrency_key, limit_n, weight, pass)
    SELECT new.namespace, new.queue, new.concurrency_key,
        COALESCE((SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key),
                 (SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = ''),
                 4611686018427387904),
        COALESCE((SELECT weight FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key), 1),
        COALESCE((SELECT pass FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
                  AND queued > 0 AND running < limit_n ORDER BY pass LIMIT 1), 0)
    WHERE new.state IN (0, 1) AND true
    ON CONFLICT (namespace, queue, concurrency_key) DO NOTHING;
    UPDATE concurrency_keys SET
        pass = CASE WHEN queued = 0 AND new.state IN (0, -2) AND old.state NOT IN (0, -2) THEN max(pass, COALESCE((SELECT k.pass FROM concurrency_keys k
            WHERE k.namespace = new.namespace AND k.queue = new.queue AND k.queued > 0 AND k.running < k.limit_n
            ORDER BY k.pass LIMIT 1), pass)) ELSE pass END,
        queued = queued + (new.state IN (0, -2)) - (old.state IN (0, -2)),
        running = running + (new.state = 1) - (old.state = 1)
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
    DELETE FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
        AND concurrency_key = new.concurrency_key AND queued = 0 AND running = 0;
    UPDATE invocations SET state = -2 WHERE seq = new.seq AND new.state = 0;
END;

ALTER TABLE queues ADD COLUMN concurrency BLOB;
