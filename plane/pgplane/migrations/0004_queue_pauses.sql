-- Paused queues (issue 29 item 18): a row means the queue is paused — it accepts submits,
-- and no claim takes its invocations (the claim statements skip a queue with a row here).
-- A table of its own rather than a column of queues, whose rows are the admission blocks.
CREATE TABLE {schema}.queue_pauses (
    namespace text   NOT NULL,
    queue     text   NOT NULL,
    paused_ms bigint NOT NULL,
    PRIMARY KEY (namespace, queue)
);
