-- A key whose only jobs are delayed has no counter row, as on PostgreSQL (issue 27; conformance
-- case Concurrency/DelayedKeyJoinsWhenDue). 015's insert trigger made the key's row for every
-- keyed insert, a delayed one (state -1) too, and counted nothing into it: QueueStatsList
-- listed the key as 0 queued, 0 running, and the row kept the turn of the submit until the job
-- was due, when it joined at the later of that stale pass and the turn of the moment. Now the
-- row is made when a job of the key becomes claimable or starts (here for an insert, by
-- invocations_keyed_state for a delayed or shaped row that becomes due), so a key joins at the
-- turn of the moment it has work. The body is 015's; only the WHEN clause changes. Rows that
-- count nothing are dropped: every other path deletes a key's row when both its counts reach 0.
DROP TRIGGER invocations_keyed_insert;

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
        priority_low = CASE WHEN new.state NOT IN (0, -2) THEN priority_low
            WHEN queued = 0 THEN new.priority ELSE min(priority_low, new.priority) END,
        priority_high = CASE WHEN new.state NOT IN (0, -2) THEN priority_high
            WHEN queued = 0 THEN new.priority ELSE max(priority_high, new.priority) END,
        queued = queued + (new.state IN (0, -2)),
        running = running + (new.state = 1)
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
    UPDATE invocations SET state = -2 WHERE seq = new.seq AND new.state = 0;
END;

DELETE FROM concurrency_keys WHERE queued = 0 AND running = 0;
