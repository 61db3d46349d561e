-- A keyed job's end is counted in the statement that ends it (issue 27: burn-down with
-- keys; the same pattern as 0013 for the start). The settle's terminal write of a group
-- (setTerminalManyKeyed, plane/pgplane/statements.go) counts the ends of keyed rows that
-- were claimable (queued − n) or running (running − n) in their keys' counter rows,
-- set-based, in the statement that ends them, and the statement after it (keyEndsEmptied)
-- deletes the rows of those keys left counting nothing and holding no rate state (0014's
-- rule: queued = 0, running = 0, tokens < 0, next_ms = 0). invocations_keyed_count, which
-- counted those transitions (-2 or 1 to a terminal state) one row at a time — a PL/pgSQL
-- call, an UPDATE and a conditional DELETE per job — is no longer called for them in a
-- transaction that says it counts its own ends: one whose setting lakeshore.keyed_end is
-- 'counted' (transaction-local, set before its first keyed end, keyEndCounted). A process
-- of the build before, running beside a new one during a rolling upgrade, never sets it,
-- so the trigger still counts its ends. Every other change of a keyed row (submits,
-- requeues on retry, promotions, placed starts) is still counted by the trigger, and 0013's
-- starts by the claim. The terminal write is the plane's only statement that ends a row.
-- The function is 0014's; the insert's trigger is 0013's.
DROP TRIGGER invocations_keyed_count_change ON {schema}.invocations;
CREATE TRIGGER invocations_keyed_count_change AFTER UPDATE OF state, waiting ON {schema}.invocations
    FOR EACH ROW WHEN (NEW.concurrency_key IS NOT NULL AND OLD.state <> NEW.state
        AND NOT (OLD.state = -2 AND NEW.state = 1
            AND coalesce(current_setting('lakeshore.keyed_start', true), '') = 'counted')
        AND NOT (OLD.state IN (-2, 1) AND NEW.state >= 2
            AND coalesce(current_setting('lakeshore.keyed_end', true), '') = 'counted'))
    EXECUTE FUNCTION {schema}.invocations_keyed_count();

-- And the BEFORE trigger that turns a keyed row made claimable (state 0, not waiting) into
-- a claimable keyed row (-2) is called only for such a row: its function (0007's) changes
-- nothing in any other, yet it was called, one PL/pgSQL call each, for every state change
-- of a keyed row — the start and the end of every job among them.
DROP TRIGGER invocations_keyed_state ON {schema}.invocations;
CREATE TRIGGER invocations_keyed_state BEFORE INSERT OR UPDATE OF state, waiting ON {schema}.invocations
    FOR EACH ROW WHEN (NEW.concurrency_key IS NOT NULL AND NEW.state = 0 AND NOT NEW.waiting)
    EXECUTE FUNCTION {schema}.invocations_keyed_state();
