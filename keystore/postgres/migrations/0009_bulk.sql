-- Version 9 is the bulk helper's (issue #22, bulk decisions); this file
-- only keeps the versions without a gap on the branch that adds
-- 0010_breaker_reason.sql. The bulk branch's 0009 replaces it.
SELECT 1;
