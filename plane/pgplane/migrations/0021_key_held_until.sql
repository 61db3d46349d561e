-- A dedup window outlives its holder's trim (docs/semantics.md "Dedup windows"): an
-- invocation submitted with unique_for holds its key until created + its window, and the
-- trims (InvocationTrim, the retention pass) keep it until then, so a submit within the
-- window still finds it however long ago it finished. key_held_until is that time (ms),
-- NULL for an invocation without a window and once the holder gave its key up (a later
-- submit took it over). Nullable, no default: ADD COLUMN is a catalog change, no rewrite.
ALTER TABLE {schema}.invocations ADD COLUMN key_held_until bigint;
