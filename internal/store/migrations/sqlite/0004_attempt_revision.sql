-- The weights revision of the replica that served each attempt, as the
-- gateway knew it when the attempt started (configured, or read from the
-- engine), so that a rerun's two attempts can be seen to have run the same
-- weights. '' when unknown; a constant default adds the column without
-- rewriting the table.

ALTER TABLE attempts ADD COLUMN model_revision TEXT NOT NULL DEFAULT '';
