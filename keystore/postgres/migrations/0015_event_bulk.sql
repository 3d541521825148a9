-- n8n-guard keystore on PostgreSQL, version 15: the audit shows one entry
-- per bulk decision. A key resolved by a bulk action names it in its event
-- (keystore.Event.Bulk; '' for every other event), and the action keeps
-- the decision in the person's words: who, the note, the resolution and
-- whether it is final (an action kept before has none of them). Columns
-- with a constant default: no table is rewritten.
ALTER TABLE guard_events ADD COLUMN bulk text COLLATE "C" NOT NULL DEFAULT '';

ALTER TABLE guard_bulk
    ADD COLUMN by_person  text NOT NULL DEFAULT '',
    ADD COLUMN note       text NOT NULL DEFAULT '',
    ADD COLUMN resolution text NOT NULL DEFAULT '',
    ADD COLUMN final      boolean NOT NULL DEFAULT false;

-- The keys of one bulk (the audit's link), newest first.
CREATE INDEX guard_events_bulk ON guard_events (bulk, seq) WHERE bulk <> '';
