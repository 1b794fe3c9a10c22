-- current_scaling: per service, the newest Pareto front and scaling recommendation.
CREATE TEMPORARY VIEW current_scaling AS
SELECT f.service, CARDINALITY(f.front) AS front_points, f.latency_quantile,
       s.current_replicas, s.desired_replicas, s.action, s.reason_code, f.window_end_ms, f.policy_version
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY service ORDER BY window_end_ms DESC) AS newest
  FROM stormwatch_pareto_fronts
) AS f
LEFT JOIN (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY service ORDER BY `sequence` DESC) AS newest
  FROM stormwatch_scaling_decisions
) AS s ON s.service = f.service AND s.newest = 1
WHERE f.newest = 1;
