-- queues: admission blocks, and the token bucket of each rate-limited queue.
CREATE TABLE queues (
    namespace          TEXT    NOT NULL,
    queue              TEXT    NOT NULL,
    max_depth          INTEGER NOT NULL DEFAULT 0,
    on_full            TEXT    NOT NULL DEFAULT 'reject',
    rate_limit         REAL    NOT NULL DEFAULT 0,
    burst              INTEGER NOT NULL DEFAULT 0,
    deadline_cutoff_ms INTEGER NOT NULL DEFAULT 0,
    tokens             REAL    NOT NULL DEFAULT 0,
    tokens_ms          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, queue)
) WITHOUT ROWID;

CREATE TABLE workers (
    id         TEXT    PRIMARY KEY,
    namespace  TEXT    NOT NULL,
    host       TEXT    NOT NULL,
    pid        INTEGER NOT NULL,
    queues     TEXT    NOT NULL,
    started_ms INTEGER NOT NULL,
    seen_ms    INTEGER NOT NULL
);

CREATE TABLE tokens (
    id          TEXT    PRIMARY KEY,
    hash        BLOB    NOT NULL UNIQUE,
    namespace   TEXT    NOT NULL,
    queue       TEXT    NOT NULL,
    permissions TEXT    NOT NULL,
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL DEFAULT 0,
    revoked_ms  INTEGER NOT NULL DEFAULT 0
);
