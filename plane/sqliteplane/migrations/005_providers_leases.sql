-- Elastic queues (issue 17). queue_providers holds the provider attached to a queue: its
-- plane.ProviderRef as JSON. It is a table of its own rather than a column of queues, whose
-- rows are the admission blocks (a row there means "this queue has an admission block").
CREATE TABLE queue_providers (
    namespace  TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    provider   TEXT    NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (namespace, queue)
) WITHOUT ROWID;

-- named_leases: one holder at a time per (namespace, name), e.g. the supervisor acting for
-- "provider/QUEUE"; expires_ms is on the plane's clock.
CREATE TABLE named_leases (
    namespace  TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    holder     TEXT    NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
) WITHOUT ROWID;

-- Workers launched by a provider say so, and how busy they are.
ALTER TABLE workers ADD COLUMN provider  TEXT    NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN launch_id TEXT    NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN running   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN idle_ms   INTEGER NOT NULL DEFAULT 0;
