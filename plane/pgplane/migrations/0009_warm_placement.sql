-- Placement, continued (issue 25 item 2; plane/placement.go, docs/semantics.md
-- "Placement"). The same design as SQLite's migration 011:
--
-- Warm host-key preference: an invocation's host key (its metadata's lakeshore.host_key, ''
-- without one) in host_key; placement_warm holds one row per (queue, host key, shape) ever
-- submitted with a host key; a claim naming warm host keys reads the rows of its keys, keeps
-- the pairs whose shape it may take and locks the head of each (FOR UPDATE SKIP LOCKED)
-- through invocations_warm or invocations_warm_priority: jobs of other host keys are never
-- read.
ALTER TABLE {schema}.invocations ADD COLUMN host_key text NOT NULL DEFAULT '';

CREATE INDEX invocations_warm ON {schema}.invocations (namespace, queue, host_key, shape, id)
    WHERE host_key <> '' AND (state = -3 OR (state = 0 AND NOT waiting));
CREATE INDEX invocations_warm_priority ON {schema}.invocations (namespace, queue, host_key, shape, priority DESC, id)
    WHERE host_key <> '' AND (state = -3 OR (state = 0 AND NOT waiting));

CREATE TABLE {schema}.placement_warm (
    namespace     text   NOT NULL,
    queue         text   NOT NULL,
    host_key      text   NOT NULL,
    shape         text   NOT NULL,
    created_ms    bigint NOT NULL,
    idle_since_ms bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, queue, host_key, shape)
);

CREATE FUNCTION {schema}.invocations_warm_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.placement_warm (namespace, queue, host_key, shape, created_ms)
    VALUES (NEW.namespace, NEW.queue, NEW.host_key, NEW.shape, NEW.created_ms)
    ON CONFLICT (namespace, queue, host_key, shape) DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER invocations_warm_insert AFTER INSERT ON {schema}.invocations
    FOR EACH ROW WHEN (NEW.host_key <> '') EXECUTE FUNCTION {schema}.invocations_warm_insert();

-- Trimming (maintenance): a shape (or warm pair) row without a live invocation (state < 2)
-- gets idle_since_ms on one pass and is deleted on a later pass once idle long enough, under
-- a SHARE lock of the table that waits for every transaction that inserted into it (so a
-- concurrent submit's invocation is visible to the check, or its insert re-creates the row
-- after the delete). invocations_placed answers "any live invocation?" with one probe.
ALTER TABLE {schema}.placement_shapes ADD COLUMN idle_since_ms bigint NOT NULL DEFAULT 0;
CREATE INDEX invocations_placed ON {schema}.invocations (namespace, queue, shape, host_key)
    WHERE (shape <> '' OR host_key <> '') AND state < 2;

-- Workers register what they offer (JSON) and the host keys they are warm for (space-separated; '' none).
ALTER TABLE {schema}.workers ADD COLUMN offers text NOT NULL DEFAULT '';
ALTER TABLE {schema}.workers ADD COLUMN warm_host_keys text NOT NULL DEFAULT '';
