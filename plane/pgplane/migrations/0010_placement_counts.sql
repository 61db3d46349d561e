-- Demand per shape (issue 25 item 5; plane/demand.go, docs/providers.md "Launching by
-- shape"). The same design as SQLite's migration 012: placement_counts keeps, per (queue,
-- shape) other than the default, how many invocations are queued (state 0, waiting or
-- not, and -3) and running (state 1), so Driver.DemandList reads counters, never the
-- queued jobs. The triggers keep them in the statement of every change of a shaped row's
-- state, whichever code path makes it. Each transaction adds to one of 8 shards (by its
-- transaction id), so concurrent claims of one shape rarely wait on one counter row; a
-- read sums the shards. A deadlock between two transactions' shards is retried as any
-- (pgplane's tx). Every change writes a row version, so the table is vacuumed as often as
-- counts (after 1,000 dead versions), or a read scans pages of dead versions.
CREATE TABLE {schema}.placement_counts (
    namespace text     NOT NULL,
    queue     text     NOT NULL,
    shape     text     NOT NULL,
    shard     smallint NOT NULL,
    queued    bigint   NOT NULL DEFAULT 0,
    running   bigint   NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, queue, shape, shard)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_cost_delay = 0);

INSERT INTO {schema}.placement_counts (namespace, queue, shape, shard, queued, running)
SELECT namespace, queue, shape, 0, count(*) FILTER (WHERE state IN (0, -1, -3)), count(*) FILTER (WHERE state = 1)
FROM {schema}.invocations WHERE shape <> '' AND state <= 1 GROUP BY namespace, queue, shape;

CREATE FUNCTION {schema}.placement_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    dq bigint := 0;
    dr bigint := 0;
    ns text;
    q text;
    sh text;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        dq := dq - (OLD.state IN (0, -1, -3))::int;
        dr := dr - (OLD.state = 1)::int;
        ns := OLD.namespace; q := OLD.queue; sh := OLD.shape;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        dq := dq + (NEW.state IN (0, -1, -3))::int;
        dr := dr + (NEW.state = 1)::int;
        ns := NEW.namespace; q := NEW.queue; sh := NEW.shape;
    END IF;
    IF dq = 0 AND dr = 0 THEN
        RETURN NULL;
    END IF;
    INSERT INTO {schema}.placement_counts AS c (namespace, queue, shape, shard, queued, running)
    VALUES (ns, q, sh, (txid_current() % 8)::smallint, dq, dr)
    ON CONFLICT (namespace, queue, shape, shard) DO UPDATE SET
        queued = c.queued + excluded.queued, running = c.running + excluded.running;
    RETURN NULL;
END $$;

CREATE TRIGGER placement_count AFTER INSERT OR UPDATE OF state ON {schema}.invocations
    FOR EACH ROW WHEN (NEW.shape <> '') EXECUTE FUNCTION {schema}.placement_count();
CREATE TRIGGER placement_count_delete AFTER DELETE ON {schema}.invocations
    FOR EACH ROW WHEN (OLD.shape <> '') EXECUTE FUNCTION {schema}.placement_count();
