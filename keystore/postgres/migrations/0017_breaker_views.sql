-- n8n-guard keystore on PostgreSQL, version 17: one namespace's failures
-- pause that namespace's writes only (keystore/breaker_view.go). A breaker
-- keeps its namespaces' views (keystore.EncodeViews: who is paused alone,
-- until when, the failures each counted) and the first namespaces that
-- reserved through it (two tell it is shared), and the namespace whose
-- failures alone opened it for every namespace (opened_by: another
-- namespace's reserve narrows it to that namespace's view). Rows written
-- before have none of them: no view, none seen, opened by agreement.
-- Columns with a constant default: no table is rewritten.
ALTER TABLE guard_breakers
    ADD COLUMN views           jsonb  NOT NULL DEFAULT '[]',
    ADD COLUMN seen_namespaces text[] NOT NULL DEFAULT '{}',
    ADD COLUMN opened_by       text   NOT NULL DEFAULT '';
