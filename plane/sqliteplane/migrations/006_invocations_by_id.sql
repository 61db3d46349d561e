-- invocations keyed by id, WITHOUT ROWID: the row is stored in the B-tree of its id, so a
-- submit writes one B-tree fewer (no rowid table beside the unique index on id) and every
-- statement that finds an invocation by id reads one B-tree fewer. The seq column (the
-- rowid) goes: nothing ordered by it, every statement addressed it only after reading the
-- id. (Numbered 006: another branch adds 005.) Indexes as before, rebuilt on the new table.
CREATE TABLE invocations_by_id (
    id                  TEXT    NOT NULL PRIMARY KEY,
    namespace           TEXT    NOT NULL,
    queue               TEXT    NOT NULL,
    key                 TEXT,
    state               INTEGER NOT NULL,
    priority            REAL    NOT NULL DEFAULT 0,
    payload             BLOB,
    metadata            BLOB,
    attempt             INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL,
    attempt_timeout_ms  INTEGER NOT NULL DEFAULT 0,
    deadline_ms         INTEGER NOT NULL DEFAULT 0,
    available_ms        INTEGER NOT NULL,
    lease_token         TEXT,
    lease_expires_ms    INTEGER NOT NULL DEFAULT 0,
    attempt_deadline_ms INTEGER NOT NULL DEFAULT 0,
    worker              TEXT,
    result              BLOB,
    error               BLOB,
    created_ms          INTEGER NOT NULL,
    started_ms          INTEGER NOT NULL DEFAULT 0,
    finished_ms         INTEGER NOT NULL DEFAULT 0,
    next_frame          INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO invocations_by_id (id, namespace, queue, key, state, priority, payload, metadata, attempt,
    max_attempts, attempt_timeout_ms, deadline_ms, available_ms, lease_token, lease_expires_ms,
    attempt_deadline_ms, worker, result, error, created_ms, started_ms, finished_ms, next_frame)
SELECT id, namespace, queue, key, state, priority, payload, metadata, attempt,
    max_attempts, attempt_timeout_ms, deadline_ms, available_ms, lease_token, lease_expires_ms,
    attempt_deadline_ms, worker, result, error, created_ms, started_ms, finished_ms, next_frame
FROM invocations;
DROP TABLE invocations;
ALTER TABLE invocations_by_id RENAME TO invocations;
CREATE UNIQUE INDEX invocations_key ON invocations (namespace, queue, key) WHERE key IS NOT NULL;
-- Listing and the fifo/filo claims (004); the priority and boltzmann claims (003).
CREATE INDEX invocations_queue ON invocations (namespace, queue, state, id);
CREATE INDEX invocations_priority ON invocations (namespace, queue, priority DESC, id) WHERE state = 0;
-- Maintenance.
CREATE INDEX invocations_lease ON invocations (lease_expires_ms) WHERE state = 1;
CREATE INDEX invocations_attempt_deadline ON invocations (attempt_deadline_ms) WHERE state = 1 AND attempt_deadline_ms > 0;
CREATE INDEX invocations_deadline ON invocations (deadline_ms) WHERE state = 0 AND deadline_ms > 0;
CREATE INDEX invocations_finished ON invocations (finished_ms) WHERE state >= 2;
CREATE INDEX invocations_due ON invocations (available_ms) WHERE state = -1;
CREATE INDEX invocations_due_deadline ON invocations (deadline_ms) WHERE state = -1 AND deadline_ms > 0;
