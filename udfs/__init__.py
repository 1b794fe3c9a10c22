"""Python UDFs that Flink jobs register, for per-window work only (graph analysis, fronts, state
machines), run in thread mode. Per-span work stays in Flink SQL on the JVM."""
