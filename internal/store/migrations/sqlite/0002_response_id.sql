-- The engine's id of a Responses API response and the replica holding it,
-- so a request continuing that response (previous_response_id) can be
-- routed there. '' when unset; existing rows get '' without a rewrite.

ALTER TABLE requests ADD COLUMN response_id TEXT NOT NULL DEFAULT '';

ALTER TABLE requests ADD COLUMN response_replica TEXT NOT NULL DEFAULT '';

-- Partial: most requests carry no response id, and they stay out of the
-- index. Lookups must repeat the predicate to use it. Not unique: the
-- engine, not the gateway, makes the ids, and a duplicate must not fail
-- the journal batch that records it.
CREATE INDEX requests_response_id ON requests (response_id, created_at) WHERE response_id <> '';
