-- Placement (issue 25 item 2; plane/placement.go, docs/semantics.md "Placement").
--
-- An invocation may carry a requirement (what its worker must offer: CPUs, memory, GPUs, a
-- GPU type, labels), stored as JSON in requirement, and its shape key in shape ('' for the
-- default shape, which every worker satisfies). Claimable rows of another shape are stored
-- in state -3 (planekit.StateShaped; every read reports them as queued), so the claim
-- indexes of the default shape (invocations_queue's state 0 range, invocations_priority)
-- never hold them and a claim without offers costs what it cost before. A claim with offers
-- reads placement_shapes (one row per (queue, shape) ever submitted, with the requirement),
-- keeps the shapes its offers satisfy, and reads the head of each of those through
-- invocations_shaped or invocations_shaped_priority: rows of shapes it cannot run are never
-- read, however many there are. Rows without a requirement pay one WHEN test.
--
-- A requirement with a concurrency key is refused at submit (plane.SubmitParams.Validate),
-- so a row is never both keyed (-2) and shaped (-3).
ALTER TABLE invocations ADD COLUMN shape TEXT NOT NULL DEFAULT '';
ALTER TABLE invocations ADD COLUMN requirement TEXT;

-- A shape's claimable rows in the order of each claim kind.
CREATE INDEX invocations_shaped ON invocations (namespace, queue, shape, id) WHERE state = -3;
CREATE INDEX invocations_shaped_priority ON invocations (namespace, queue, shape, priority DESC, id) WHERE state = -3;
-- Deadlines of claimable shaped rows (invocations_deadline holds state 0 only).
CREATE INDEX invocations_shaped_deadline ON invocations (deadline_ms) WHERE state = -3 AND deadline_ms > 0;

CREATE TABLE placement_shapes (
    namespace   TEXT    NOT NULL,
    queue       TEXT    NOT NULL,
    shape       TEXT    NOT NULL,
    requirement TEXT    NOT NULL,
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (namespace, queue, shape)
) WITHOUT ROWID;

-- A new shaped row: record its shape, and move it to -3 when it is claimable.
CREATE TRIGGER invocations_shaped_insert AFTER INSERT ON invocations
WHEN new.shape <> ''
BEGIN
    INSERT INTO placement_shapes (namespace, queue, shape, requirement, created_ms)
    VALUES (new.namespace, new.queue, new.shape, new.requirement, new.created_ms)
    ON CONFLICT (namespace, queue, shape) DO NOTHING;
    UPDATE invocations SET state = -3 WHERE seq = new.seq AND new.state = 0;
END;

-- A shaped row becomes claimable (a retry, a promotion of a delayed row, an expired
-- lease, …), whichever code path makes it: move it to -3.
CREATE TRIGGER invocations_shaped_state AFTER UPDATE OF state ON invocations
WHEN new.shape <> '' AND new.state = 0
BEGIN
    UPDATE invocations SET state = -3 WHERE seq = new.seq;
END;
