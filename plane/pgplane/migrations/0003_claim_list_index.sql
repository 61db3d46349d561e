-- One index fewer on every insert (issue 12, batch inserts). The fifo claim index
-- (namespace, queue, id) WHERE state = 0 AND NOT waiting and the listing index
-- (namespace, queue, state, id) become one: (namespace, queue, state, waiting, id). Fifo and
-- filo claims walk its (queue, state 0, not waiting) range by id forward or backward, as they
-- walked the partial index; a listing scans each (state, waiting) range by id and merges
-- them. A claimable row is now in the heap, the primary key, this index and the priority
-- index (4 entries, was 5); a row with a key in invocations_key too.
CREATE INDEX IF NOT EXISTS invocations_list ON {schema}.invocations (namespace, queue, state, waiting, id);
DROP INDEX IF EXISTS {schema}.invocations_fifo;
DROP INDEX IF EXISTS {schema}.invocations_list_state;
