-- n8n-guard keystore on PostgreSQL, version 17: one namespace's failures
-- pause that namespace's writes only (keystore/breaker_view.go). A breaker
-- keeps its namespaces' views (keystore.EncodeViews: who is paused alone,
-- until when, the failures each counted) and the first namespaces that
-- reserved through it (two tell it is shared). Rows written before have
-- neither: no view, none seen. Columns with a constant default: no table
-- is rewritten.
ALTER TABLE guard_breakers
    ADD COLUMN views           jsonb  NOT NULL DEFAULT '[]',
    ADD COLUMN seen_namespaces text[] NOT NULL DEFAULT '{}';
