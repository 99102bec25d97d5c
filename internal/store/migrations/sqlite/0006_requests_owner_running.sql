-- The owner index covers running requests only, and ends with the id, as in PostgreSQL (see its
-- migration of the same number): the one lookup by owner (lease renewal) is
-- of running requests and repeats the predicate, updates by id never take
-- this index instead of the primary key, and a finished request leaves it.

DROP INDEX requests_owner;

CREATE INDEX requests_owner_running ON requests (owner, id) WHERE outcome = '';
