-- How long the request waited in its pool's queue, in milliseconds, all its
-- waits together (docs/design.md §3, "The queue"). GET /v1/requests/{id}
-- shows it. A constant default adds the column without rewriting the table;
-- requests journaled before it read back as 0 (no gateway queued them then).

ALTER TABLE requests ADD COLUMN queued_ms INTEGER NOT NULL DEFAULT 0;
