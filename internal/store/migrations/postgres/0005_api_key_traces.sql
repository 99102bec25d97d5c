-- The trace mode of a key managed with `fencegate keys`: off, errors or all,
-- which its requests follow instead of the gateway's traces.mode; '' follows
-- the gateway's. A constant default adds the column without rewriting the
-- table, and keys created before it follow the gateway as they did.

ALTER TABLE api_keys ADD COLUMN traces TEXT NOT NULL DEFAULT '';
