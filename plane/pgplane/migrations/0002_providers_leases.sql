-- Elastic queues (issue 17). queue_providers holds the provider attached to a queue: its
-- plane.ProviderRef as JSON text. It is a table of its own rather than a column of queues,
-- whose rows are the admission blocks (a row there means "this queue has an admission block").
CREATE TABLE {schema}.queue_providers (
    namespace  text   NOT NULL,
    queue      text   NOT NULL,
    provider   text   NOT NULL,
    updated_ms bigint NOT NULL,
    PRIMARY KEY (namespace, queue)
);

-- named_leases: one holder at a time per (namespace, name), e.g. the supervisor acting for
-- "provider/QUEUE"; expires_ms is on the plane's clock (unlike leases, the maintenance
-- leader's, on the database's).
CREATE TABLE {schema}.named_leases (
    namespace  text   NOT NULL,
    name       text   NOT NULL,
    holder     text   NOT NULL,
    expires_ms bigint NOT NULL,
    PRIMARY KEY (namespace, name)
);

-- Workers launched by a provider say so, and how busy they are.
ALTER TABLE {schema}.workers
    ADD COLUMN provider  text    NOT NULL DEFAULT '',
    ADD COLUMN launch_id text    NOT NULL DEFAULT '',
    ADD COLUMN running   integer NOT NULL DEFAULT 0,
    ADD COLUMN idle_ms   bigint  NOT NULL DEFAULT 0;
