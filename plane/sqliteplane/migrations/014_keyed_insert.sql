-- A keyed submit writes its row once, and a keyed row enters one claim index instead of two
-- (issue 27: a keyed submit cost ten times an unkeyed one; a keyed claim dirtied a page of
-- each of two indexes, a different page for each key).
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
--
-- invocations_keyed (key, id) goes: invocations_keyed_priority (key, priority descending, id)
-- serves every claim order. Each key's counter row gains the range of its claimable jobs'
-- priorities (priority_low, priority_high: every claimable job of the key lies within
-- them, reset by the first job of an empty key, widened by each job that becomes
-- claimable, never narrowed until the key empties): when they are equal, a fifo or filo
-- claim reads the first or last id of that one level; otherwise the head of each level
-- (claim.go, keyHead).
ALTER TABLE concurrency_keys ADD COLUMN priority_low REAL NOT NULL DEFAULT 0;
ALTER TABLE concurrency_keys ADD COLUMN priority_high REAL NOT NULL DEFAULT 0;
UPDATE concurrency_keys SET
    priority_low = COALESCE((SELECT min(i.priority) FROM invocations i WHERE i.namespace = concurrency_keys.namespace
        AND i.queue = concurrency_keys.queue AND i.concurrency_key = concurrency_keys.concurrency_key AND i.state = -2), 0),
    priority_high = COALESCE((SELECT max(i.priority) FROM invocations i WHERE i.namespace = concurrency_keys.namespace
        AND i.queue = concurrency_keys.queue AND i.concurrency_key = concurrency_keys.concurrency_key AND i.state = -2), 0);
DROP INDEX invocations_keyed;

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
        priority_low = CASE WHEN new.state NOT IN (0, -2) THEN priority_low
            WHEN queued = 0 THEN new.priority ELSE min(priority_low, new.priority) END,
        priority_high = CASE WHEN new.state NOT IN (0, -2) THEN priority_high
            WHEN queued = 0 THEN new.priority ELSE max(priority_high, new.priority) END,
        queued = queued + (new.state IN (0, -2)),
        running = running + (new.state = 1)
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
    UPDATE invocations SET state = -2 WHERE seq = new.seq AND new.state = 0;
END;

-- Every other change of a keyed row's state (013's invocations_keyed_state, unchanged but
-- for the priority range of a row that becomes claimable).
DROP TRIGGER invocations_keyed_state;

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
        COALESCE((SELECT pass FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
                  AND queued > 0 AND running < limit_n ORDER BY pass LIMIT 1), 0)
    WHERE new.state IN (0, 1) AND true
    ON CONFLICT (namespace, queue, concurrency_key) DO NOTHING;
    UPDATE concurrency_keys SET
        pass = CASE WHEN queued = 0 AND new.state IN (0, -2) AND old.state NOT IN (0, -2) THEN max(pass, COALESCE((SELECT k.pass FROM concurrency_keys k
            WHERE k.namespace = new.namespace AND k.queue = new.queue AND k.queued > 0 AND k.running < k.limit_n
            ORDER BY k.pass LIMIT 1), pass)) ELSE pass END,
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
