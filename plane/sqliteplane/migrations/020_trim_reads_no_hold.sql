-- The trims (InvocationTrim, the retention pass of every maintenance pass) read finished
-- invocations by finished_ms. Since 019 a finished invocation still holding its key for a
-- dedup window is kept, and invocations_finished held those rows too: every pass read
-- again, inside the writer's transaction, every holder past the cutoff whose window
-- lasts (300,000 of them made a submit take a median of 1-1.6 s instead of 12-37 ms;
-- docs/semantics.md "Dedup windows"). Now the trim reads invocations_trimmable, which
-- holds no row with a hold, after clearing the holds that have ended through
-- invocations_held (planekit.HoldsEnded: each hold is cleared once, when its window ends).
CREATE INDEX invocations_trimmable ON invocations (finished_ms) WHERE state >= 2 AND key_held_until IS NULL;
CREATE INDEX invocations_held ON invocations (key_held_until) WHERE state >= 2 AND key_held_until IS NOT NULL;
DROP INDEX invocations_finished;
