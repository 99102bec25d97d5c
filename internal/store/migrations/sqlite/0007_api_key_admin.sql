-- Whether a key managed with `fencegate keys` is an admin key: admin keys reach
-- the operator's calls (/admin/*, pprof, full /readyz and /metrics), tenant keys
-- reach /v1/* only. Keys created before it are tenant keys, as they were.

ALTER TABLE api_keys ADD COLUMN admin BOOLEAN NOT NULL DEFAULT FALSE;
