-- Durable schedules (issue 27). One row per schedule: spec is its queue, rule and submit
-- options as JSON (internal/planekit's scheduleSpec); next_ms is the next tick to fire (0:
-- none, e.g. paused); last_ms and last_id are the tick last fired and its invocation. The
-- writer's maintenance fires the rows with 0 < next_ms <= now, through the due index, so
-- idle schedules cost one index probe a pass whatever their number.
CREATE TABLE schedules (
    namespace  TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    spec       BLOB    NOT NULL,
    paused     INTEGER NOT NULL DEFAULT 0,
    next_ms    INTEGER NOT NULL DEFAULT 0,
    last_ms    INTEGER NOT NULL DEFAULT 0,
    last_id    TEXT    NOT NULL DEFAULT '',
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
) WITHOUT ROWID;

CREATE INDEX schedules_due ON schedules (next_ms) WHERE next_ms > 0;
