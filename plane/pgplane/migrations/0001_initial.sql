-- Every table lives in one schema, written {schema} here and replaced by the configured
-- (quoted) name when the migration runs.
--
-- invocations: the truth. state: 0 queued, 1 running, 2 succeeded, 3 failed, 4 cancelled,
-- 5 killed, 6 timeout. Times are Unix milliseconds of the plane's clock; 0 means unset.
-- waiting is true for a queued invocation that is not claimable yet (delayed, or in retry
-- backoff): such rows stay out of the claim indexes, so a claim costs O(log n) however many
-- are delayed, and a claim first moves the due ones in (invocations_waiting).
CREATE TABLE {schema}.invocations (
    id                  text             PRIMARY KEY,
    namespace           text             NOT NULL,
    queue               text             NOT NULL,
    key                 text,
    state               smallint         NOT NULL,
    priority            double precision NOT NULL DEFAULT 0,
    waiting             boolean          NOT NULL DEFAULT false,
    payload             bytea            NOT NULL,
    metadata            bytea,
    attempt             integer          NOT NULL DEFAULT 0,
    max_attempts        integer          NOT NULL,
    attempt_timeout_ms  bigint           NOT NULL DEFAULT 0,
    deadline_ms         bigint           NOT NULL DEFAULT 0,
    available_ms        bigint           NOT NULL,
    lease_token         text,
    lease_expires_ms    bigint           NOT NULL DEFAULT 0,
    attempt_deadline_ms bigint           NOT NULL DEFAULT 0,
    worker              text,
    result              bytea,
    error               bytea,
    created_ms          bigint           NOT NULL,
    started_ms          bigint           NOT NULL DEFAULT 0,
    finished_ms         bigint           NOT NULL DEFAULT 0,
    next_frame          bigint           NOT NULL DEFAULT 0
) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 1);
-- Idempotency keys: one live or kept invocation per (queue, key); submits use ON CONFLICT.
CREATE UNIQUE INDEX invocations_key ON {schema}.invocations (namespace, queue, key) WHERE key IS NOT NULL;
-- Claim indexes, claimable rows only: fifo walks (queue, id) forward, filo backward;
-- priority and boltzmann walk (queue, priority DESC, id).
CREATE INDEX invocations_fifo ON {schema}.invocations (namespace, queue, id) WHERE state = 0 AND NOT waiting;
CREATE INDEX invocations_priority ON {schema}.invocations (namespace, queue, priority DESC, id) WHERE state = 0 AND NOT waiting;
-- Delayed and backed-off rows by due time: per queue (a claim promotes its queue's due rows)
-- and across queues (maintenance promotes every due row and wakes the queues' claimers).
CREATE INDEX invocations_waiting ON {schema}.invocations (namespace, queue, available_ms) WHERE state = 0 AND waiting;
CREATE INDEX invocations_due ON {schema}.invocations (available_ms) WHERE state = 0 AND waiting;
-- Listing, by state and id (a listing of every state merges one scan per state).
CREATE INDEX invocations_list_state ON {schema}.invocations (namespace, queue, state, id);
-- Maintenance.
CREATE INDEX invocations_lease ON {schema}.invocations (lease_expires_ms) WHERE state = 1;
CREATE INDEX invocations_attempt_deadline ON {schema}.invocations (attempt_deadline_ms) WHERE state = 1 AND attempt_deadline_ms > 0;
CREATE INDEX invocations_deadline ON {schema}.invocations (deadline_ms) WHERE state = 0 AND deadline_ms > 0;
CREATE INDEX invocations_finished ON {schema}.invocations (finished_ms) WHERE state >= 2;

-- counts: invocations per (queue, state, priority level), kept in the same transactions as
-- the rows. Each transaction adds its changes to one of a few shards picked at random, so
-- concurrent transactions rarely wait on one counter row; a count sums the shards.
CREATE TABLE {schema}.counts (
    namespace text             NOT NULL,
    queue     text             NOT NULL,
    state     smallint         NOT NULL,
    priority  double precision NOT NULL,
    shard     smallint         NOT NULL,
    n         bigint           NOT NULL,
    PRIMARY KEY (namespace, queue, state, priority, shard)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_cost_delay = 0);

-- frames: VALUE frames of invocations (their END/ERROR frame is derived from the row) and
-- every frame of topics.
CREATE TABLE {schema}.frames (
    journal text     NOT NULL,
    seq     bigint   NOT NULL,
    kind    smallint NOT NULL,
    value   bytea,
    attempt integer  NOT NULL DEFAULT 0,
    time_ms bigint   NOT NULL,
    PRIMARY KEY (journal, seq)
);

CREATE TABLE {schema}.topics (
    journal    text    PRIMARY KEY,
    next_seq   bigint  NOT NULL DEFAULT 0,
    closed     boolean NOT NULL DEFAULT false,
    updated_ms bigint  NOT NULL
);
CREATE INDEX topics_updated ON {schema}.topics (updated_ms);

-- queues: admission blocks, and the token bucket of each rate-limited queue. A submit to a
-- queue with a block locks its row, which orders the admission decisions of that queue.
CREATE TABLE {schema}.queues (
    namespace          text             NOT NULL,
    queue              text             NOT NULL,
    max_depth          bigint           NOT NULL DEFAULT 0,
    on_full            text             NOT NULL DEFAULT 'reject',
    rate_limit         double precision NOT NULL DEFAULT 0,
    burst              bigint           NOT NULL DEFAULT 0,
    deadline_cutoff_ms bigint           NOT NULL DEFAULT 0,
    tokens             double precision NOT NULL DEFAULT 0,
    tokens_ms          bigint           NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, queue)
);

CREATE TABLE {schema}.workers (
    namespace  text    NOT NULL,
    id         text    NOT NULL,
    host       text    NOT NULL,
    pid        integer NOT NULL,
    queues     text[]  NOT NULL,
    started_ms bigint  NOT NULL,
    seen_ms    bigint  NOT NULL,
    PRIMARY KEY (namespace, id)
);

CREATE TABLE {schema}.tokens (
    id          text   PRIMARY KEY,
    hash        bytea  NOT NULL UNIQUE,
    namespace   text   NOT NULL,
    queue       text   NOT NULL,
    permissions text[] NOT NULL,
    created_ms  bigint NOT NULL,
    expires_ms  bigint NOT NULL DEFAULT 0,
    revoked_ms  bigint NOT NULL DEFAULT 0
);

-- leases: the maintenance leader's lease, on the database's own clock (not the plane's, which
-- tests may stop): a holder renews it; another process takes it once it has expired.
CREATE TABLE {schema}.leases (
    name       text        PRIMARY KEY,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);
