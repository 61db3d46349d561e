-- Maintenance deletes the tokens revoked or expired more than the retention period ago
-- (planekit.TrimTokens, docs/semantics.md "Retention"): a provider supervisor revokes one
-- token per launch, so the table would otherwise grow by a row a launch for ever. These two
-- indexes make that delete, which runs every maintenance pass, read only the stopped tokens
-- (a BitmapOr of the two) instead of the whole table; tokens are created and
-- revoked rarely, so they cost nothing on any hot path.
CREATE INDEX tokens_revoked ON {schema}.tokens (revoked_ms) WHERE revoked_ms > 0;
CREATE INDEX tokens_expiring ON {schema}.tokens (expires_ms) WHERE expires_ms > 0;
