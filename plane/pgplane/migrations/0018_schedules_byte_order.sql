-- Schedules are listed a page at a time in byte order of (namespace, name) (ScheduleList's
-- cursor; docs/http-api.md GET /v1/schedules). The primary key is in the database's
-- collation, which need not be byte order: this index makes a page one range read of
-- O(limit) rows whatever the collation.
CREATE INDEX schedules_byte_order ON {schema}.schedules (namespace COLLATE "C", name COLLATE "C");
