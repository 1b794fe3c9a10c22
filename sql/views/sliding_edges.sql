-- sliding_edges: the edges in the topology's sliding windows, those aligned with its service windows and
-- the health windows: what the suspects and health jobs read. (The tumbling ones count each call once,
-- for totals over time.)
CREATE TEMPORARY VIEW sliding_edges AS
SELECT * FROM stormwatch_edges WHERE window_kind = 'sliding';
