-- Demand per shape (issue 25 item 5; plane/demand.go, docs/providers.md "Launching by
-- shape"). placement_counts keeps, per (queue, shape) other than the default, how many
-- invocations are queued (states 0, -1 and -3: claimable, delayed or shaped) and running
-- (state 1), so Driver.DemandList reads counters, never the queued jobs. The triggers
-- below keep them in the statement of every change of a shaped row's state, whichever code
-- path makes it; a move between two queued states (0 → -3) changes nothing. The default
-- shape's counts are the queue's counts (the counts table) less its shapes'.
CREATE TABLE placement_counts (
    namespace TEXT    NOT NULL,
    queue     TEXT    NOT NULL,
    shape     TEXT    NOT NULL,
    queued    INTEGER NOT NULL DEFAULT 0,
    running   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, queue, shape)
) WITHOUT ROWID;

-- The shaped rows already stored (one pass at upgrade).
INSERT INTO placement_counts (namespace, queue, shape, queued, running)
SELECT namespace, queue, shape, SUM(state IN (0, -1, -3)), SUM(state = 1)
FROM invocations WHERE shape <> '' AND state <= 1 GROUP BY namespace, queue, shape;

CREATE TRIGGER placement_counts_insert AFTER INSERT ON invocations
WHEN new.shape <> '' AND new.state <= 1
BEGIN
    INSERT INTO placement_counts (namespace, queue, shape, queued, running)
    VALUES (new.namespace, new.queue, new.shape, new.state IN (0, -1, -3), new.state = 1)
    ON CONFLICT (namespace, queue, shape) DO UPDATE SET
        queued = queued + excluded.queued, running = running + excluded.running;
END;

CREATE TRIGGER placement_counts_state AFTER UPDATE OF state ON invocations
WHEN new.shape <> '' AND ((old.state IN (0, -1, -3)) <> (new.state IN (0, -1, -3)) OR (old.state = 1) <> (new.state = 1))
BEGIN
    INSERT INTO placement_counts (namespace, queue, shape, queued, running)
    VALUES (new.namespace, new.queue, new.shape,
        (new.state IN (0, -1, -3)) - (old.state IN (0, -1, -3)), (new.state = 1) - (old.state = 1))
    ON CONFLICT (namespace, queue, shape) DO UPDATE SET
        queued = queued + excluded.queued, running = running + excluded.running;
END;

CREATE TRIGGER placement_counts_delete AFTER DELETE ON invocations
WHEN old.shape <> '' AND old.state <= 1
BEGIN
    UPDATE placement_counts SET queued = queued - (old.state IN (0, -1, -3)), running = running - (old.state = 1)
    WHERE namespace = old.namespace AND queue = old.queue AND shape = old.shape;
END;
