-- The priority claim orders by (priority DESC, id). An ascending (priority, id) index served
-- it only with a sort of the whole top priority level per claim; this one is walked in order.
-- It also serves the boltzmann lookup (one priority, oldest first).
DROP INDEX invocations_priority;
CREATE INDEX invocations_priority ON invocations (namespace, queue, priority DESC, id) WHERE state = 0;
