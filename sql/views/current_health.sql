-- current_health: every service's (and instance's, and edge's) health as of its newest window.
CREATE TEMPORARY VIEW current_health AS
SELECT entity.`key` AS entity, entity.kind AS kind, status, ROUND(score, 3) AS score,
       ROUND(error_rate, 3) AS error_rate, window_end_ms, policy_version
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY entity.`key` ORDER BY window_end_ms DESC) AS newest
  FROM stormwatch_health
)
WHERE newest = 1;
