-- Fair share: a key that joins the rotation goes first on a tie, and a key that joins while
-- every key is at its limit gets no credit for the others' history (issue 27: the small
-- tenant's wait under a 90/10 skew; docs/semantics.md "Concurrency keys and fair share").
--
-- A key joins at the current turn, the smallest pass of the ready keys. Before, a tie with
-- that key went by key name (the ready index's last column), so a tenant that came back
-- behind a key named before it waited one more claim of that key. joined marks a key that
-- joined since its last claim (set when it gets a claimable job with none before, cleared by
-- its claim, which rewrites the row anyway) and orders the ready index after pass, so such a
-- key takes the next claim at its turn: no write is added. And when no key was ready (every
-- key with jobs at its limit, or with nothing claimable), the current turn was taken as 0,
-- so a new key joined ahead of every other by all the claims they had made, and a key that
-- came back with its row kept (a job running) kept its own pass, however far behind. The
-- current turn is now, for a new row and a returning one alike: the smallest pass of the
-- ready keys; else the smallest pass of the keys with claimable jobs (each at its limit);
-- else the largest pass of the queue's keys (none has a claimable job: a pass that stopped
-- while the others claimed gives no credit). With no ready key every row read holds a
-- lease (or, on this plane, a delayed job), so these scans are bounded by the jobs running.
ALTER TABLE concurrency_keys ADD COLUMN joined INTEGER NOT NULL DEFAULT 0;
DROP INDEX concurrency_keys_ready;
CREATE INDEX concurrency_keys_ready ON concurrency_keys (namespace, queue, pass, joined DESC) WHERE queued > 0 AND running < limit_n;

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

-- A keyed claim's trigger clears joined in the counter update it makes, and writes the
-- key's counter row and nothing else (the claim is the writer's hot path): 013's trigger
-- first ran an INSERT of the key's counter row guarded by WHERE NOT EXISTS, which never
-- inserts — the row it claims (state -2) was counted as queued by invocations_keyed_insert
-- or invocations_keyed_state when it became claimable, and a counter row is deleted only by
-- the triggers, when its queued and running counts are both 0, so the key's row exists while
-- the key has a claimable job. That INSERT still cost every claim its write cursors on
-- concurrency_keys and their indexes and the primary-key probe (about 7 % of the process's
-- CPU seconds of a keyed burn-down).
DROP TRIGGER invocations_keyed_claim;

CREATE TRIGGER invocations_keyed_claim AFTER UPDATE OF state ON invocations
WHEN new.concurrency_key IS NOT NULL AND old.state = -2 AND new.state = 1
BEGIN
    UPDATE concurrency_keys SET queued = queued - 1, running = running + 1, pass = pass + 1.0 / weight, joined = 0
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
END;
