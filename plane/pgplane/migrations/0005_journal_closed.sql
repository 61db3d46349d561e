-- A final post ends an invocation's journal without settling the job (issue 24, semantics
-- 1): journal_closed is the attempt whose final post stored the END frame, 0 while no
-- attempt did. planekit.Row.JournalClosedBy reads it: the journal is closed while that
-- attempt runs and after the job ends; the next attempt of a retried job opens it again.
ALTER TABLE {schema}.invocations ADD COLUMN journal_closed integer NOT NULL DEFAULT 0;
