-- Whether the engine may have acted on each attempt: the request let the
-- engine run tools itself (a Responses request's mcp, code_interpreter,
-- web_search_preview, ... tools) and the attempt's body may have reached it,
-- so a tool may have run (docs/design.md §5). GET /v1/requests/{id} shows it.
-- A constant default adds the column without rewriting the table; attempts
-- journaled before it read back as false (the gateway recorded nothing then).

ALTER TABLE attempts ADD COLUMN engine_may_have_acted BOOLEAN NOT NULL DEFAULT FALSE;
