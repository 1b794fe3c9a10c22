"""Flink jobs. Each module runs as `python jobs/<job>.py` (embedded mini-cluster) or with
`flink run -py jobs/<job>.py` on a cluster; `stormwatch run <job>` does either."""
