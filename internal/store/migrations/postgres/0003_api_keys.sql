-- API keys managed with `fencegate keys`. Only the SHA-256 of a key is kept
-- (hex), never the key. A revoked key keeps its row: its id stays taken,
-- because the journal names requests' tenants by key id and a new key under
-- an old id would read the old key's requests. models is a JSON array of
-- model names ('[]': every model); limits of 0 mean none. Times are unix
-- nanoseconds, revoked_at 0 while the key is valid.

CREATE TABLE api_keys (
    id             TEXT    NOT NULL PRIMARY KEY,
    key_sha256     TEXT    NOT NULL,
    models         TEXT    NOT NULL,
    max_concurrent BIGINT  NOT NULL,
    rpm            BIGINT  NOT NULL,
    tpm            BIGINT  NOT NULL,
    created_at     BIGINT  NOT NULL,
    revoked_at     BIGINT  NOT NULL
);

CREATE UNIQUE INDEX api_keys_key_sha256 ON api_keys (key_sha256);
