-- Each stored key's place in a full pool's queue (docs/design.md §3, "The
-- queue"), as a configured key has it: its weight against the other keys, its
-- priority class, and whether it may set the X-Fencegate-Fairness-Id and
-- X-Fencegate-Priority headers. Keys created before it read back with the
-- defaults: weight 1, class 0, neither header.

ALTER TABLE api_keys ADD COLUMN weight INTEGER NOT NULL DEFAULT 1;
ALTER TABLE api_keys ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN fairness_header BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE api_keys ADD COLUMN priority_header BOOLEAN NOT NULL DEFAULT FALSE;
