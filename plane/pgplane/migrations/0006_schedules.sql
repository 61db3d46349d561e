-- Durable schedules (issue 27). One row per schedule: spec is its queue, rule and submit
-- options as JSON (internal/planekit's scheduleSpec); next_ms is the next tick to fire (0:
-- none, e.g. paused); last_ms and last_id are the tick last fired and its invocation. The
-- maintenance lease holder fires the rows with 0 < next_ms <= now (locked FOR UPDATE SKIP
-- LOCKED) and moves them to their next tick in the transaction that submits the fire, whose
-- idempotency key (plane.ScheduleKey) makes a second submit of a tick resolve to the first.
CREATE TABLE {schema}.schedules (
    namespace  text    NOT NULL,
    name       text    NOT NULL,
    spec       bytea   NOT NULL,
    paused     boolean NOT NULL DEFAULT false,
    next_ms    bigint  NOT NULL DEFAULT 0,
    last_ms    bigint  NOT NULL DEFAULT 0,
    last_id    text    NOT NULL DEFAULT '',
    created_ms bigint  NOT NULL,
    updated_ms bigint  NOT NULL,
    PRIMARY KEY (namespace, name)
);

CREATE INDEX schedules_due ON {schema}.schedules (next_ms) WHERE next_ms > 0;
