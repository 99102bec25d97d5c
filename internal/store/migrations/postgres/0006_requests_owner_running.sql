-- The owner index covers running requests only, and ends with the id.
-- The one query that looks requests up by owner (a gateway renewing the leases of the requests it
-- runs) is of running ones and repeats the predicate. As a full index on
-- (owner, outcome) it was also a candidate for every update by id that
-- checks the owner (WHERE id = $1 AND owner = $2): on a new, empty table
-- the planner chose it over the primary key, and since one gateway owns
-- every request it journals, each such update then walked all of that
-- gateway's rows, slower with every request. A partial index cannot serve a
-- query that does not imply its predicate, so those updates use the primary
-- key whatever the statistics say; a finished request leaves the index; and
-- a takeover (by id and owner, of a running request) that takes it finds
-- its row in the index itself.
-- Built inside the migration's transaction, which holds writes to requests
-- for one scan of the table.

DROP INDEX requests_owner;

CREATE INDEX requests_owner_running ON requests (owner, id) WHERE outcome = '';
