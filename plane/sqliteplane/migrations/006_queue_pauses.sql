-- Paused queues (issue 29 item 18): a row means the queue is paused — it accepts submits,
-- and no claim takes its invocations. A table of its own rather than a column of queues,
-- whose rows are the admission blocks.
CREATE TABLE queue_pauses (
    namespace TEXT    NOT NULL,
    queue     TEXT    NOT NULL,
    paused_ms INTEGER NOT NULL,
    PRIMARY KEY (namespace, queue)
) WITHOUT ROWID;
