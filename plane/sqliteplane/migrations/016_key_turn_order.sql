-- Two changes to the keys' counter rows (issue 27; docs/semantics.md "Concurrency keys and
-- fair share"). The three trigger bodies are 015's but for the lines marked below.
--
-- 1. A key whose only jobs are delayed has no counter row, as on PostgreSQL (conformance case
-- Concurrency/DelayedKeyJoinsWhenDue). 015's insert trigger made the key's row for every
-- keyed insert, a delayed one (state -1) too, and counted nothing into it: QueueStatsList
-- listed the key as 0 queued, 0 running, and the row kept the turn of the submit until the
-- job was due, when it joined at the later of that stale pass and the turn of the moment.
-- Now the row is made when a job of the key becomes claimable or starts (here for an insert,
-- by invocations_keyed_state for a delayed or shaped row that becomes due), so a key joins
-- at the turn of the moment it has work (the insert trigger's WHEN clause). Rows that count
-- nothing are dropped: every other path deletes a key's row when both its counts reach 0.
--
-- 2. Keys at the same pass take their turns in the order they reached it, not by name:
-- turn_at is the seq of the job with which the key last joined the rotation or last
-- started one (set in the same counter updates, so no write is added), and orders the ready
-- index after (pass, joined DESC). Before, a tie went by key name, so in every round of a
-- round-robin "tenant-a" went before "tenant-z", and the claims of one round jumped across
-- the invocations table in the order of the names rather than of the jobs: a burn-down of
-- 100 keys (planetest.Burndown64) wrote 2.9 times as many distinct rows' pages per commit as
-- one without keys. A key's round now follows the order of its jobs, as deficit round-robin
-- keeps its active keys in arrival order.
ALTER TABLE concurrency_keys ADD COLUMN turn_at INTEGER NOT NULL DEFAULT 0;
DROP INDEX concurrency_keys_ready;
CREATE INDEX concurrency_keys_ready ON concurrency_keys (namespace, queue, pass, joined DESC, turn_at) WHERE queued > 0 AND running < limit_n;

DROP TRIGGER invocations_keyed_insert;
DROP TRIGGER invocations_keyed_state;
DROP TRIGGER invocations_keyed_claim;

CREATE TRIGGER invocations_keyed_insert AFTER INSERT ON invocations
WHEN new.concurrency_key IS NOT NULL AND new.state IN (-2, 0, 1)
BEGIN
    INSERT INTO concurrency_keys (namespace, queue, concurrency_key, limit_n, weight, pass)
    SELECT new.namespace, new.queue, new.concurrency_key,
        COALESCE((SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key),
                 (SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = ''),
                 4611686018427387904),
        COALESCE((SELECT weight FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key), 1),
        COALESCE((SELECT k.pass FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue
                  AND k.queued > 0 AND k.running < k.limit_n ORDER BY k.pass LIMIT 1),
                 (SELECT min(k.pass) FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue AND k.queued > 0),
                 (SELECT max(k.pass) FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue), 0)
    WHERE NOT EXISTS (SELECT 1 FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
        AND concurrency_key = new.concurrency_key);
    UPDATE concurrency_keys SET
        pass = CASE WHEN queued = 0 AND new.state IN (0, -2) THEN max(pass, COALESCE((SELECT k.pass FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue
                  AND k.queued > 0 AND k.running < k.limit_n ORDER BY k.pass LIMIT 1),
                 (SELECT min(k.pass) FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue AND k.queued > 0),
                 (SELECT max(k.pass) FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue), 0)) ELSE pass END,
        joined = CASE WHEN queued = 0 AND new.state IN (0, -2) THEN 1 ELSE joined END,
        turn_at = CASE WHEN queued = 0 AND new.state IN (0, -2) THEN new.seq ELSE turn_at END,
        priority_low = CASE WHEN new.state NOT IN (0, -2) THEN priority_low
            WHEN queued = 0 THEN new.priority ELSE min(priority_low, new.priority) END,
        priority_high = CASE WHEN new.state NOT IN (0, -2) THEN priority_high
            WHEN queued = 0 THEN new.priority ELSE max(priority_high, new.priority) END,
        queued = queued + (new.state IN (0, -2)),
        running = running + (new.state = 1)
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
    UPDATE invocations SET state = -2 WHERE seq = new.seq AND new.state = 0;
END;

CREATE TRIGGER invocations_keyed_state AFTER UPDATE OF state ON invocations
WHEN new.concurrency_key IS NOT NULL AND old.state <> new.state AND NOT (old.state = -2 AND new.state = 1)
    AND NOT (old.state = 1 AND new.state >= 2)
BEGIN
    INSERT INTO concurrency_keys (namespace, queue, concurrency_key, limit_n, weight, pass)
    SELECT new.namespace, new.queue, new.concurrency_key,
        COALESCE((SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key),
                 (SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = ''),
                 4611686018427387904),
        COALESCE((SELECT weight FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key), 1),
        COALESCE((SELECT k.pass FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue
                  AND k.queued > 0 AND k.running < k.limit_n ORDER BY k.pass LIMIT 1),
                 (SELECT min(k.pass) FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue AND k.queued > 0),
                 (SELECT max(k.pass) FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue), 0)
    WHERE new.state IN (0, 1) AND true
    ON CONFLICT (namespace, queue, concurrency_key) DO NOTHING;
    UPDATE concurrency_keys SET
        pass = CASE WHEN queued = 0 AND new.state IN (0, -2) AND old.state NOT IN (0, -2) THEN max(pass, COALESCE((SELECT k.pass FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue
                  AND k.queued > 0 AND k.running < k.limit_n ORDER BY k.pass LIMIT 1),
                 (SELECT min(k.pass) FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue AND k.queued > 0),
                 (SELECT max(k.pass) FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue), 0)) ELSE pass END,
        joined = CASE WHEN queued = 0 AND new.state IN (0, -2) AND old.state NOT IN (0, -2) THEN 1 ELSE joined END,
        turn_at = CASE WHEN queued = 0 AND new.state IN (0, -2) AND old.state NOT IN (0, -2) THEN new.seq ELSE turn_at END,
        priority_low = CASE WHEN new.state NOT IN (0, -2) OR old.state IN (0, -2) THEN priority_low
            WHEN queued = 0 THEN new.priority ELSE min(priority_low, new.priority) END,
        priority_high = CASE WHEN new.state NOT IN (0, -2) OR old.state IN (0, -2) THEN priority_high
            WHEN queued = 0 THEN new.priority ELSE max(priority_high, new.priority) END,
        queued = queued + (new.state IN (0, -2)) - (old.state IN (0, -2)),
        running = running + (new.state = 1) - (old.state = 1)
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
    DELETE FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
        AND concurrency_key = new.concurrency_key AND queued = 0 AND running = 0;
    UPDATE invocations SET state = -2 WHERE seq = new.seq AND new.state = 0;
END;

CREATE TRIGGER invocations_keyed_claim AFTER UPDATE OF state ON invocations
WHEN new.concurrency_key IS NOT NULL AND old.state = -2 AND new.state = 1
BEGIN
    UPDATE concurrency_keys SET queued = queued - 1, running = running + 1, pass = pass + 1.0 / weight, joined = 0, turn_at = new.seq
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
END;

DELETE FROM concurrency_keys WHERE queued = 0 AND running = 0;
