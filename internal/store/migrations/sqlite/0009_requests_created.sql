-- The console lists recent requests newest first, bounded by time (Store.Recent): an index
-- on created_at serves that order without sorting the whole table.

CREATE INDEX requests_created ON requests (created_at, id);
