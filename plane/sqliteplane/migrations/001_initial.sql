-- invocations: the truth. state: 0 queued, 1 running, 2 succeeded, 3 failed, 4 cancelled,
-- 5 killed, 6 timeout. Times are Unix milliseconds; 0 means unset.
CREATE TABLE invocations (
    seq                 INTEGER PRIMARY KEY,
    id                  TEXT    NOT NULL UNIQUE,
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
);
CREATE UNIQUE INDEX invocations_key ON invocations (namespace, queue, key) WHERE key IS NOT NULL;
-- Claim indexes: fifo and filo walk (queue, id); priority and boltzmann walk (queue, priority, id).
CREATE INDEX invocations_fifo ON invocations (namespace, queue, id) WHERE state = 0;
CREATE INDEX invocations_priority ON invocations (namespace, queue, priority, id) WHERE state = 0;
-- Maintenance indexes.
CREATE INDEX invocations_lease ON invocations (lease_expires_ms) WHERE state = 1;
CREATE INDEX invocations_attempt_deadline ON invocations (attempt_deadline_ms) WHERE state = 1 AND attempt_deadline_ms > 0;
CREATE INDEX invocations_deadline ON invocations (deadline_ms) WHERE state = 0 AND deadline_ms > 0;
CREATE INDEX invocations_finished ON invocations (finished_ms) WHERE state >= 2;

-- counts: invocations per (queue, state, priority level), kept in the same transactions as
-- the rows, so Count is O(levels) and the boltzmann draw is O(levels).
CREATE TABLE counts (
    namespace TEXT    NOT NULL,
    queue     TEXT    NOT NULL,
    state     INTEGER NOT NULL,
    priority  REAL    NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (namespace, queue, state, priority)
) WITHOUT ROWID;

-- frames: VALUE frames of invocations (their END/ERROR frame is derived from the row, the
-- truth) and every frame of topics.
CREATE TABLE frames (
    journal TEXT    NOT NULL,
    seq     INTEGER NOT NULL,
    kind    INTEGER NOT NULL,
    value   BLOB,
    attempt INTEGER NOT NULL DEFAULT 0,
    time_ms INTEGER NOT NULL,
    PRIMARY KEY (journal, seq)
);

CREATE TABLE topics (
    journal    TEXT    PRIMARY KEY,
    next_seq   INTEGER NOT NULL DEFAULT 0,
    closed     INTEGER NOT NULL DEFAULT 0,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX topics_updated ON topics (updated_ms);
