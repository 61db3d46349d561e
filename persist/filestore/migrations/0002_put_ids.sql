-- Idempotency ids of recent put batches (PutOpts.ID) and what they got: a put repeating
-- an id answers these indexes instead of appending again. `at` is the put's time in Unix
-- nanoseconds; flushes delete ids older than PutIDRetention.
CREATE TABLE IF NOT EXISTS put_ids (
	id        TEXT PRIMARY KEY,
	partition TEXT NOT NULL,
	lo        INTEGER NOT NULL,
	n         INTEGER NOT NULL,
	at        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS put_ids_at ON put_ids (at);
