-- Publication deadlines of fragments: a flush records, in each fragment row, the latest
-- time (on this database's clock) it may publish it, and carries the same deadline in
-- the object's metadata. The check below runs at COMMIT (a deferred constraint
-- trigger), so a flush that stalled past its deadline can never publish an object the
-- sweeper may already have deleted. Rows of older versions have no deadline.
ALTER TABLE fragments ADD COLUMN publish_by timestamptz;

CREATE FUNCTION fragments_check_publish_by() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.publish_by IS NOT NULL AND clock_timestamp() > NEW.publish_by THEN
		RAISE EXCEPTION 'fragment % is published after its deadline % (the flush took longer than its FlushTimeout)', NEW.object, NEW.publish_by
			USING ERRCODE = 'LSF01';
	END IF;
	RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER fragments_publish_by AFTER INSERT ON fragments
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fragments_check_publish_by();

-- Idempotency ids of recent put batches (persist.PutOpts.ID) and what they got: a put
-- repeating an id answers these indexes instead of appending again. Rows older than
-- persist.PutIDRetention are deleted by flushes.
CREATE TABLE put_ids (
	queue      text        NOT NULL,
	id         text        NOT NULL,
	partition  text        NOT NULL,
	lo         bigint      NOT NULL,
	n          bigint      NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (queue, id)
);
CREATE INDEX put_ids_age ON put_ids (queue, created_at);
