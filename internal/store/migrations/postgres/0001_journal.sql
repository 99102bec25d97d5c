-- The request journal. Times are BIGINT unix nanoseconds (0 = not set),
-- booleans BOOLEAN.

CREATE TABLE requests (
    id                      TEXT    NOT NULL PRIMARY KEY,
    tenant                  TEXT    NOT NULL,
    -- NULL when the client sent no Idempotency-Key: NULLs never collide in
    -- the unique index below.
    idempotency_key         TEXT,
    body_hash               TEXT    NOT NULL,
    model                   TEXT    NOT NULL,
    stream                  BOOLEAN NOT NULL,
    phase                   TEXT    NOT NULL,
    outcome                 TEXT    NOT NULL,
    owner                   TEXT    NOT NULL,
    owner_lease_until       BIGINT  NOT NULL,
    first_delta_sent        BOOLEAN NOT NULL,
    first_delta_at          BIGINT  NOT NULL,
    delivered_output_tokens BIGINT  NOT NULL,
    model_revision          TEXT    NOT NULL,
    error                   BYTEA,
    response                BYTEA,
    response_is_sse         BOOLEAN NOT NULL,
    response_status         BIGINT  NOT NULL,
    created_at              BIGINT  NOT NULL,
    updated_at              BIGINT  NOT NULL,
    expires_at              BIGINT  NOT NULL
);

CREATE UNIQUE INDEX requests_idempotency_key ON requests (tenant, idempotency_key);

CREATE INDEX requests_owner ON requests (owner, outcome);

CREATE INDEX requests_expires_at ON requests (expires_at);

CREATE TABLE attempts (
    id           TEXT    NOT NULL PRIMARY KEY,
    request_id   TEXT    NOT NULL,
    n            BIGINT  NOT NULL,
    replica      TEXT    NOT NULL,
    lease_epoch  BIGINT  NOT NULL,
    started_at   BIGINT  NOT NULL,
    ended_at     BIGINT  NOT NULL,
    end_reason   TEXT    NOT NULL,
    failure      TEXT    NOT NULL,
    cancel_sent  BOOLEAN NOT NULL,
    cancel_acked BOOLEAN NOT NULL
);

CREATE INDEX attempts_request ON attempts (request_id, n);

CREATE TABLE trace_events (
    request_id TEXT    NOT NULL,
    seq        BIGINT  NOT NULL,
    at         BIGINT  NOT NULL,
    kind       TEXT    NOT NULL,
    payload    BYTEA,
    PRIMARY KEY (request_id, seq)
);
