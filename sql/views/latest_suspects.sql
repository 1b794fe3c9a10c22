-- latest_suspects: the ranking of root-cause suspects in the newest window ranked so far.
CREATE TEMPORARY VIEW latest_suspects AS
SELECT `rank`, service, ROUND(score, 2) AS score, ROUND(confidence, 2) AS confidence, flagged,
       window_start_ms, window_end_ms, evidence
FROM stormwatch_suspects
WHERE window_end_ms = (SELECT MAX(window_end_ms) FROM stormwatch_suspects);
