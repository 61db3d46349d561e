-- A keyed claim counts its starts in one statement (issue 27: burn-down with keys). The
-- claim's start of keyed rows (setRunningKeyed, plane/pgplane/statements.go) updates the
-- counter rows of the keys it starts from — queued − n, running + n, the turn advanced by
-- n/weight, joined cleared — in the statement that starts them, set-based; the keys' rows
-- are the ones the claim locked to take their turns. invocations_keyed_count, which counted
-- that transition (-2 to 1) one row at a time (one PL/pgSQL call and one UPDATE each), is
-- no longer called for it in a transaction that says it counts its own starts: one whose
-- setting lakeshore.keyed_start is 'counted' (transaction-local, set by the claim before its
-- first keyed start, keyStartCounted). A process of the build before, running beside a new
-- one during a rolling upgrade, never sets it, so the trigger still counts its starts.
-- Every other change of a keyed row's state (submits, requeues, ends, cancels, expiries,
-- maintenance, placed starts from -3) is still counted by the trigger, so no path can leave
-- a counter behind. The trigger is also no longer called for an update that leaves the
-- state as it was, which counted nothing (the function is 0012's). A trigger's WHEN may not
-- name OLD on INSERT: the insert and the update have a trigger each, both calling the same
-- function.
DROP TRIGGER invocations_keyed_count ON {schema}.invocations;
CREATE TRIGGER invocations_keyed_count AFTER INSERT ON {schema}.invocations
    FOR EACH ROW WHEN (NEW.concurrency_key IS NOT NULL) EXECUTE FUNCTION {schema}.invocations_keyed_count();
CREATE TRIGGER invocations_keyed_count_change AFTER UPDATE OF state, waiting ON {schema}.invocations
    FOR EACH ROW WHEN (NEW.concurrency_key IS NOT NULL AND OLD.state <> NEW.state AND NOT (OLD.state = -2 AND NEW.state = 1
        AND coalesce(current_setting('lakeshore.keyed_start', true), '') = 'counted'))
    EXECUTE FUNCTION {schema}.invocations_keyed_count();
