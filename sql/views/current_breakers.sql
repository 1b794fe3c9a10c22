-- current_breakers: the state of every circuit breaker and retry gate, from their newest decisions.
CREATE TEMPORARY VIEW current_breakers AS
SELECT b.entity.`key` AS entity, b.state, b.previous_state, b.admitted_share, b.reason_code, b.enforced,
       g.max_retries, g.base_delay_ms, g.budget_retries, b.window_end_ms, b.policy_version
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY entity.`key` ORDER BY `sequence` DESC) AS newest
  FROM stormwatch_breaker_decisions
) AS b
LEFT JOIN (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY entity.`key` ORDER BY `sequence` DESC) AS newest
  FROM stormwatch_retry_decisions
) AS g ON g.entity.`key` = b.entity.`key` AND g.newest = 1
WHERE b.newest = 1;
