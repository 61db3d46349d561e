-- Placement, continued (issue 25 item 2; plane/placement.go, docs/semantics.md "Placement").
--
-- Warm host-key preference. An invocation's host key (its metadata's lakeshore.host_key, ''
-- without one) is stored in host_key. placement_warm holds one row per (queue, host key,
-- shape) ever submitted with a host key; a claim naming warm host keys reads those rows of
-- its keys (a few), keeps the pairs whose shape it may take (the default shape, or one its
-- offers satisfy) and reads the head of each through invocations_warm or
-- invocations_warm_priority: jobs of other host keys are never read. Only rows with a host
-- key are in these indexes (submits without one pay one WHEN test).
ALTER TABLE invocations ADD COLUMN host_key TEXT NOT NULL DEFAULT '';

CREATE INDEX invocations_warm ON invocations (namespace, queue, host_key, shape, id)
    WHERE host_key <> '' AND state IN (0, -3);
CREATE INDEX invocations_warm_priority ON invocations (namespace, queue, host_key, shape, priority DESC, id)
    WHERE host_key <> '' AND state IN (0, -3);

CREATE TABLE placement_warm (
    namespace     TEXT    NOT NULL,
    queue         TEXT    NOT NULL,
    host_key      TEXT    NOT NULL,
    shape         TEXT    NOT NULL,
    created_ms    INTEGER NOT NULL,
    idle_since_ms INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, queue, host_key, shape)
) WITHOUT ROWID;

CREATE TRIGGER invocations_warm_insert AFTER INSERT ON invocations
WHEN new.host_key <> ''
BEGIN
    INSERT INTO placement_warm (namespace, queue, host_key, shape, created_ms)
    VALUES (new.namespace, new.queue, new.host_key, new.shape, new.created_ms)
    ON CONFLICT (namespace, queue, host_key, shape) DO NOTHING;
END;

-- Trimming (maintenance, planekit): a placement_shapes or placement_warm row whose shape
-- (and host key) has no live invocation (state < 2: delayed, queued, running) gets
-- idle_since_ms on one pass and is deleted on a later pass once idle long enough; a live
-- invocation clears it. invocations_placed answers "any live invocation of this shape (and
-- host key)?" with one probe; it holds only rows with a shape or a host key.
ALTER TABLE placement_shapes ADD COLUMN idle_since_ms INTEGER NOT NULL DEFAULT 0;
CREATE INDEX invocations_placed ON invocations (namespace, queue, shape, host_key)
    WHERE (shape <> '' OR host_key <> '') AND state < 2;

-- Workers register what they offer (JSON) and the host keys they are warm for (space-separated; '' none), so
-- a queued job no live worker can run is shown as such.
ALTER TABLE workers ADD COLUMN offers TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN warm_host_keys TEXT NOT NULL DEFAULT '';
