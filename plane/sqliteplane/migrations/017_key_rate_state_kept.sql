-- A key's rate state outlives its last job (issue 27, "Rate limits per key"; docs/semantics.md).
--
-- A key's token bucket (tokens, tokens_ms) and its "slow down" hold (next_ms) are stored in
-- its counter row, which the triggers below deleted as soon as the key had nothing queued or
-- running. So a key whose jobs came one at a time found a full bucket each time (under
-- key_rate_limit 1/s, five jobs submitted 0.1 s apart all started at once), and a worker's
-- RateLimited(key, retry_after) for the key's only job was lost with the row (the job's
-- retry ends the key's count before the hold is written), letting the key's next job start
-- at once. Now the triggers keep a row that has drawn from its bucket (tokens >= 0) or been
-- held (next_ms > 0); the writer's maintenance deletes it once its bucket is full again and
-- its hold has ended (planekit.DropSettledKeys, plane.Admission.KeyRateSettled), and the
-- hold's statement makes the row of a key that has none. Such a row is in no claim index
-- (the ready index needs queued > 0), and a job of the key that comes before maintenance
-- drops it joins the rotation through it as through a new row: at the current turn, not at
-- the later of that and the pass the row kept (a key with nothing queued or running has
-- left the rotation; its rate state does not change its place in it: conformance
-- RateLimits/EmptiedKeyRejoinsAtTurn), so the two triggers that count a job becoming
-- claimable (invocations_keyed_insert, invocations_keyed_state) take the row's pass only
-- while the key has a job running (passes are never negative). The two triggers that end a
-- key's count (invocations_keyed_end for a job that finishes, 013's;
-- invocations_keyed_state for every other change, 016's) are as they were but for the
-- DELETE and that join; invocations_keyed_insert is 016's but for that join.
--
-- The rows with rate state are indexed (concurrency_keys_kept), so that maintenance reads
-- only them, not the row of every key with work: a scan of 100,000 keys' rows cost the
-- writer 17 to 50 ms a pass (BenchmarkMaintainActiveKeys). The index's predicate names only
-- the rate columns, which a queue without key rate limits or holds never writes, so its
-- counter updates (queued, running, the turn: a claim's and an end's triggers) leave the
-- index alone; a predicate on the counts (queued = 0 AND running = 0) made every one of
-- them check it, 2-4 % of the keyed burn-down. A queue under a key rate limit has all its
-- keys' rows in it.
CREATE INDEX concurrency_keys_kept ON concurrency_keys (namespace, queue, concurrency_key) WHERE tokens >= 0 OR next_ms > 0;

DROP TRIGGER invocations_keyed_end;
DROP TRIGGER invocations_keyed_state;
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
        pass = CASE WHEN queued = 0 AND new.state IN (0, -2) THEN max(CASE WHEN running > 0 THEN pass ELSE 0 END, COALESCE((SELECT k.pass FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue
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


CREATE TRIGGER invocations_keyed_end AFTER UPDATE OF state ON invocations
WHEN new.concurrency_key IS NOT NULL AND old.state = 1 AND new.state >= 2
BEGIN
    UPDATE concurrency_keys SET running = running - 1
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
    DELETE FROM concurrency_keys WHERE namespace = new.namespace AND queue = new.queue
        AND concurrency_key = new.concurrency_key AND queued = 0 AND running = 0
        AND tokens < 0 AND next_ms = 0; -- 017: a row with rate state is kept
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
        pass = CASE WHEN queued = 0 AND new.state IN (0, -2) AND old.state NOT IN (0, -2) THEN max(CASE WHEN running > 0 THEN pass ELSE 0 END, COALESCE((SELECT k.pass FROM concurrency_keys k WHERE k.namespace = new.namespace AND k.queue = new.queue
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
        AND concurrency_key = new.concurrency_key AND queued = 0 AND running = 0
        AND tokens < 0 AND next_ms = 0; -- 017: a row with rate state is kept
    UPDATE invocations SET state = -2 WHERE seq = new.seq AND new.state = 0;
END;
