-- Placement (issue 25 item 2; plane/placement.go, docs/semantics.md "Placement"). The same
-- design as SQLite's migration 010:
--
-- An invocation may carry a requirement (JSON in requirement) and its shape key in shape
-- ('' for the default shape, which every worker satisfies). A claimable row of another
-- shape (state 0, not waiting) is stored in state -3 (planekit.StateShaped; every read
-- reports it as queued), so the claim indexes of the default shape never hold it and a
-- claim without offers costs what it cost before. A claim with offers reads
-- placement_shapes (one row per (queue, shape) ever submitted), keeps the shapes its
-- offers satisfy and locks the head of each (FOR UPDATE SKIP LOCKED) through
-- invocations_shaped or invocations_shaped_priority: rows of shapes it cannot run are never
-- read. A requirement with a concurrency key is refused at submit, so a row is never both
-- keyed (-2) and shaped (-3).
ALTER TABLE {schema}.invocations ADD COLUMN shape text NOT NULL DEFAULT '';
ALTER TABLE {schema}.invocations ADD COLUMN requirement text;

CREATE INDEX invocations_shaped ON {schema}.invocations (namespace, queue, shape, id) WHERE state = -3;
CREATE INDEX invocations_shaped_priority ON {schema}.invocations (namespace, queue, shape, priority DESC, id) WHERE state = -3;
CREATE INDEX invocations_shaped_deadline ON {schema}.invocations (deadline_ms) WHERE state = -3 AND deadline_ms > 0;

CREATE TABLE {schema}.placement_shapes (
    namespace   text   NOT NULL,
    queue       text   NOT NULL,
    shape       text   NOT NULL,
    requirement text   NOT NULL,
    created_ms  bigint NOT NULL,
    PRIMARY KEY (namespace, queue, shape)
);

-- invocations_shaped_state moves a shaped row that becomes claimable to -3 before it is
-- written, whichever code path makes it (submit, retry, promotion, lease expiry).
-- invocations_shaped_insert records a new row's shape (an upsert that does nothing when
-- the shape is known: no lock is held past the statement on an existing row).
CREATE FUNCTION {schema}.invocations_shaped_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 0 AND NOT NEW.waiting THEN
        NEW.state := -3;
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION {schema}.invocations_shaped_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.placement_shapes (namespace, queue, shape, requirement, created_ms)
    VALUES (NEW.namespace, NEW.queue, NEW.shape, NEW.requirement, NEW.created_ms)
    ON CONFLICT (namespace, queue, shape) DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER invocations_shaped_state BEFORE INSERT OR UPDATE OF state, waiting ON {schema}.invocations
    FOR EACH ROW WHEN (NEW.shape <> '') EXECUTE FUNCTION {schema}.invocations_shaped_state();
CREATE TRIGGER invocations_shaped_insert AFTER INSERT ON {schema}.invocations
    FOR EACH ROW WHEN (NEW.shape <> '') EXECUTE FUNCTION {schema}.invocations_shaped_insert();
