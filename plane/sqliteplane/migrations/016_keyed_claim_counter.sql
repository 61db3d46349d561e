-- A keyed claim's trigger writes the key's counter row and nothing else (issue 27: burn-down
-- with keys; the claim is the writer's hot path).
--
-- 013's invocations_keyed_claim first ran an INSERT of the key's counter row guarded by
-- WHERE NOT EXISTS, which never inserts: the row it claims (state -2) was counted as queued
-- by invocations_keyed_insert or invocations_keyed_state when it became claimable, and a
-- counter row is deleted only by the triggers, when its queued and running counts are both
-- 0, so the key's row exists while the key has a claimable job. The INSERT still cost every
-- claim its write cursors on concurrency_keys and their indexes and the primary-key probe
-- (measured: about 7 % of the process's CPU seconds of a keyed burn-down). The trigger keeps
-- 013's UPDATE unchanged (the start's counters and its turn, pass + 1/weight). Only this
-- trigger is redefined; invocations_keyed_insert, invocations_keyed_state and
-- invocations_keyed_end are those of 014 and 013.
DROP TRIGGER invocations_keyed_claim;

CREATE TRIGGER invocations_keyed_claim AFTER UPDATE OF state ON invocations
WHEN new.concurrency_key IS NOT NULL AND old.state = -2 AND new.state = 1
BEGIN
    UPDATE concurrency_keys SET queued = queued - 1, running = running + 1, pass = pass + 1.0 / weight
    WHERE namespace = new.namespace AND queue = new.queue AND concurrency_key = new.concurrency_key;
END;
