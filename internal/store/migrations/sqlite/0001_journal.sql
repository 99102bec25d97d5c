-- The request journal. Times are INTEGER unix nanoseconds (0 = not set),
-- booleans INTEGER 0/1.

CREATE TABLE requests (
    id                      TEXT    NOT NULL PRIMARY KEY,
    tenant                  TEXT    NOT NULL,
    -- NULL when the client sent no Idempotency-Key: NULLs never collide in
    -- the unique index below.
    idempotency_key         TEXT,
    body_hash               TEXT    NOT NULL,
    model                   TEXT    NOT NULL,
    stream                  INTEGER NOT NULL,
    phase                   TEXT    NOT NULL,
    outcome                 TEXT    NOT NULL,
    owner                   TEXT    NOT NULL,
    owner_lease_until       INTEGER NOT NULL,
    first_delta_sent        INTEGER NOT NULL,
    first_delta_at          INTEGER NOT NULL,
    delivered_output_tokens INTEGER NOT NULL,
    model_revision          TEXT    NOT NULL,
    error                   BLOB,
    response                BLOB,
    response_is_sse         INTEGER NOT NULL,
    response_status         INTEGER NOT NULL,
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL,
    expires_at              INTEGER NOT NULL
);

CREATE UNIQUE INDEX requests_idempotency_key ON requests (tenant, idempotency_key);

CREATE INDEX requests_owner ON requests (owner, outcome);

CREATE INDEX requests_expires_at ON requests (expires_at);

CREATE TABLE attempts (
    id           TEXT    NOT NULL PRIMARY KEY,
    request_id   TEXT    NOT NULL,
    n            INTEGER NOT NULL,
    replica      TEXT    NOT NULL,
    lease_epoch  INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    ended_at     INTEGER NOT NULL,
    end_reason   TEXT    NOT NULL,
    failure      TEXT    NOT NULL,
    cancel_sent  INTEGER NOT NULL,
    cancel_acked INTEGER NOT NULL
);

CREATE INDEX attempts_request ON attempts (request_id, n);

CREATE TABLE trace_events (
    request_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    payload    BLOB,
    PRIMARY KEY (request_id, seq)
);
