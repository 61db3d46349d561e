-- A keyed claim's counter change and turn in one statement (issue 27: burn-down with keys).
--
-- Migration 009's invocations_keyed_state counts every state change of a keyed row with
-- the same four statements: an INSERT of the key's counter row (four subqueries: the
-- limit, the default limit, the weight and the smallest ready pass) that a claim always
-- skips ON CONFLICT, the counter UPDATE, a DELETE of an empty counter row and a move to
-- state -2. A claim (state -2 to 1) needs only the counter UPDATE: the row it claims was
-- counted as queued, so its key's counter row exists and keeps a running job. It gets a
-- trigger of its own, with the counter row made only if it is missing (one primary-key
-- probe instead of four subqueries), which also advances the key's fair-share turn (each
-- start adds 1/weight to its pass; the claim wrote that in a statement of its own before);
-- An end (state 1 to a terminal state, 2 and above) likewise needs only the running
-- counter's decrement and the DELETE of a counter row left empty. Every other change keeps
-- 009's body unchanged.
DROP TRIGGER invocations_keyed_state;

CREATE TRIGGER invocations_keyed_claim AFTER UPDATE OF state ON invocations
WHEN new.concurrency_key IS NOT NULL AND old.state = -2 AND new.state = 1
BEGIN
    INSERT INTO concurrency_keys (namespace, queue, concurrency_key, limit_n, weight, pass, queued)
    SELECT new.namespace, new.queue, new.concurrency_key,
        COALESCE((SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key),
                 (SELECT limit_n FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = ''),
                 4611686018427387904),
        COALESCE((SELECT weight FROM concurrency_limits WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key), 1),
        COALESCE((SELECT pass FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
                  AND queued > 0 AND running < limit_n ORDER BY pass LIMIT 1), 0),
        1
    WHERE NOT EXISTS (SELECT 1 FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
        AND concurrency_key = new.concurrency_key);
    UPDATE concurrency_keys SET queued = queued - 1, running = running + 1, pass = pass + 1.0 / weight
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
END;

CREATE TRIGGER invocations_keyed_end AFTER UPDATE OF state ON invocations
WHEN new.concurrency_key IS NOT NULL AND old.state = 1 AND new.state >= 2
BEGIN
    UPDATE concurrency_keys SET running = running - 1
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
    DELETE FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
        AND concurrency_key = new.concurrency_key AND queued = 0 AND running = 0;
END;

-- 009's body, for every other change of a keyed row's state.
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
        queued = queued + (new.state IN (0, -2)) - (old.state IN (0, -2)),
        running = running + (new.state = 1) - (old.state = 1)
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
    DELETE FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
        AND concurrency_key = new.concurrency_key AND queued = 0 AND running = 0;
    UPDATE invocations SET state = -2 WHERE seq = new.seq AND new.state = 0;
END;
