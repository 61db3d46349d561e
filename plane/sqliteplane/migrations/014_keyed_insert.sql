-- A keyed submit writes its row once (issue 27: a keyed submit cost ten times an unkeyed one).
--
-- Before, a claimable keyed row was inserted as queued (state 0), entering the unkeyed claim
-- indexes, and 009's insert trigger then moved it to -2 with an UPDATE that took it out of
-- them again and fired invocations_keyed_state (an INSERT of four subqueries, a counter UPDATE
-- that changed nothing, a DELETE probe). Now the driver inserts a claimable keyed row without
-- a requirement directly as -2 (submit.go); a row with a requirement is still inserted as 0
-- and moved by the triggers, as before. This trigger counts both, and makes the key's counter
-- row only when it is missing: one primary-key probe, where 009's INSERT … ON CONFLICT DO
-- NOTHING evaluated its four subqueries (the key's limit, the default limit, its weight, the
-- smallest ready pass) for every submit.
DROP TRIGGER invocations_keyed_insert;

CREATE TRIGGER invocations_keyed_insert AFTER INSERT ON invocations
WHEN new.concurrency_key IS NOT NULL
BEGIN
    INSERT INTO concurrency_keys (namespace, queue, concurrency_key, limit_n, weight, pass)
    SELECT new.namespace, new.queue, new.concurrency_key,
        COALESCE((SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key),
                 (SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = ''),
                 4611686018427387904),
        COALESCE((SELECT weight FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key), 1),
        COALESCE((SELECT pass FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
                  AND queued > 0 AND running < limit_n ORDER BY pass LIMIT 1), 0)
    WHERE NOT EXISTS (SELECT 1 FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
        AND concurrency_key = new.concurrency_key);
    UPDATE concurrency_keys SET
        pass = CASE WHEN queued = 0 AND new.state IN (0, -2) THEN max(pass, COALESCE((SELECT k.pass FROM concurrency_keys k
            WHERE k.namespace = new.namespace AND k.queue = new.queue AND k.queued > 0 AND k.running < k.limit_n
            ORDER BY k.pass LIMIT 1), pass)) ELSE pass END,
        queued = queued + (new.state IN (0, -2)),
        running = running + (new.state = 1)
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
    UPDATE invocations SET state = -2 WHERE seq = new.seq AND new.state = 0;
END;
