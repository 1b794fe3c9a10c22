"""The independent references the tests hold the jobs to, and the benchmarks measure against: a
plain-Python reading of OTLP JSON (otlp.py) and the per-window aggregates of the labelled TrainTicket
files with the ranker's evaluation protocol (trace_windows.py). Not shipped with the jobs; tests/ and
bench/ import it. reference/otlp.py imports nothing of the product, so a bug there cannot hide one in
the product; trace_windows.py reads the files through it into stormwatch/window_aggregates.py (the
plain-Python definition the Flink SQL is checked against) and feeds the ranker."""
