-- Delayed invocations. An invocation that is queued but not yet claimable (a submit with a
-- not-before time or a delay, a retry waiting out its backoff) is stored in state -1,
-- "delayed", which every read reports as queued. The claim indexes (WHERE state = 0) hold
-- only claimable rows, so a claim costs O(log n) whatever the number of delayed ones. The
-- writer promotes a delayed row to state 0 when its available_ms comes, walking
-- invocations_due from the earliest; counts keeps delayed rows under state -1 too, so the
-- boltzmann draw weighs claimable jobs only while Count(queued) adds both.
UPDATE invocations SET state = -1
    WHERE state = 0 AND available_ms > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER);
DELETE FROM counts WHERE state IN (0, -1);
INSERT INTO counts (namespace, queue, state, priority, n)
    SELECT namespace, queue, state, priority, count(*) FROM invocations WHERE state IN (0, -1)
    GROUP BY namespace, queue, state, priority;
CREATE INDEX invocations_due ON invocations (available_ms) WHERE state = -1;
-- A delayed row's deadline may pass before it is due: maintenance finds it here. Only rows
-- with both a delay and a deadline pay for this index.
CREATE INDEX invocations_due_deadline ON invocations (deadline_ms) WHERE state = -1 AND deadline_ms > 0;

-- Listing and the fifo/filo claims share one index: (queue, state, id). A claim walks the
-- state 0 range in id order; a listing walks one state's range (or merges the ranges of
-- several) from a cursor id. It replaces the partial fifo index, so a submit writes as many
-- B-trees as before.
DROP INDEX invocations_fifo;
CREATE INDEX invocations_queue ON invocations (namespace, queue, state, id);

-- Workers are keyed by (namespace, id): a worker of one namespace can never overwrite or
-- remove another namespace's worker of the same id.
CREATE TABLE workers_by_namespace (
    namespace  TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    host       TEXT    NOT NULL,
    pid        INTEGER NOT NULL,
    queues     TEXT    NOT NULL,
    started_ms INTEGER NOT NULL,
    seen_ms    INTEGER NOT NULL,
    PRIMARY KEY (namespace, id)
) WITHOUT ROWID;
INSERT INTO workers_by_namespace (namespace, id, host, pid, queues, started_ms, seen_ms)
    SELECT namespace, id, host, pid, queues, started_ms, seen_ms FROM workers;
DROP TABLE workers;
ALTER TABLE workers_by_namespace RENAME TO workers;
