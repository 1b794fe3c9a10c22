"""suspects: per-window service figures and edges -> ranked root-cause suspects, graph snapshots
and edge events, from their topics. The span path (jobs/spans.py) ranks its windows in its own job
graph with the same `attach`; this job re-ranks what is on the topics (a replay, another policy).

The span path has done the per-span work on the JVM (jobs/spans.py); this job sees a few records per service per
window. It gathers a window's records until the watermark passes the window's end, then hands them
to the pure-Python ranker (stormwatch/suspects.py) and graph tracker (stormwatch/topology_graph.py),
whose state lives in Flink state so a restart resumes where it stopped.
"""

from __future__ import annotations

import json
import sys

from pyflink.common import Row, Types
from pyflink.datastream import KeyedProcessFunction, OutputTag
from pyflink.datastream.state import ValueStateDescriptor

from jobs.common import Inserts, define, parse_args, setup, source_options, topics_and_group
from jobs.streams import DEAD_LETTERS, WindowBuffer
from stormwatch import catalog
from stormwatch.flink_env import stream_table_environment
from stormwatch.sqlfiles import load_statements
from stormwatch.suspects import SuspectPolicy, SuspectRanker, ranked_edges, service_windows
from stormwatch.topology_graph import EdgeSeen, TopologyTracker

JOB = "suspects"
INPUTS = {"service_windows": "stormwatch_service_windows", "edges": "stormwatch_edges"}
# What is read of each: the edges only in the (sliding) windows of the service windows.
READS = {**INPUTS, "edges": "sliding_edges"}
OUTPUTS = ["tables/stormwatch_suspects", "tables/stormwatch_topology_snapshots", "tables/stormwatch_edge_events",
           "tables/stormwatch_dead_letters"]

RECORD = Types.ROW_NAMED(["kind", "topic", "window_end_ms", "payload"],
                         [Types.STRING(), Types.STRING(), Types.LONG(), Types.STRING()])
SUSPECT = Types.ROW_NAMED(
    ["service", "window_start_ms", "window_end_ms", "rank", "score", "confidence", "flagged", "threshold", "evidence"],
    [Types.STRING(), Types.LONG(), Types.LONG(), Types.INT(), Types.DOUBLE(), Types.DOUBLE(), Types.BOOLEAN(),
     Types.DOUBLE(), Types.STRING()],
)
SNAPSHOT = Types.ROW_NAMED(
    ["window_end_ms", "window_start_ms", "services", "entry_points", "depth", "edges"],
    [Types.LONG(), Types.LONG(), Types.OBJECT_ARRAY(Types.STRING()), Types.OBJECT_ARRAY(Types.STRING()),
     Types.INT(), Types.STRING()],
)
EDGE_EVENT = Types.ROW_NAMED(
    ["caller", "callee", "event", "window_start_ms", "window_end_ms", "first_seen_ms", "last_seen_ms"],
    [Types.STRING(), Types.STRING(), Types.STRING(), Types.LONG(), Types.LONG(), Types.LONG(), Types.LONG()],
)
SNAPSHOTS = OutputTag("topology_snapshots", SNAPSHOT)
EDGE_EVENTS = OutputTag("edge_events", EDGE_EVENT)


class RankWindows(KeyedProcessFunction):
    """One key for the whole system: a window's verdict needs every service and edge of it."""

    def __init__(self, policy: SuspectPolicy, vanish_after_windows: int):
        self.policy = policy
        self.vanish_after_windows = vanish_after_windows

    def open(self, runtime_context):
        self.windows = WindowBuffer(runtime_context, lambda: {"service_windows": [], "edges": []})
        self.models = runtime_context.get_state(ValueStateDescriptor("models", Types.PICKLED_BYTE_ARRAY()))
        self.ranked_through = runtime_context.get_state(ValueStateDescriptor("ranked_through", Types.LONG()))

    def process_element(self, value, ctx):
        ranked_through = self.ranked_through.value()
        if ranked_through is not None and value.window_end_ms <= ranked_through:
            # Its window was ranked already: a verdict is given once, the straggler is kept aside.
            record = json.loads(value.payload)
            yield DEAD_LETTERS, Row(value.topic, record.get("kafka_partition"), record.get("kafka_offset"),
                                    f"window ending {value.window_end_ms} was already ranked when this record came",
                                    value.payload, JOB)
            return
        reason = self.windows.add(ctx, value.window_end_ms, json.loads(value.payload), into=value.kind)
        if reason is not None:
            record = json.loads(value.payload)
            yield DEAD_LETTERS, Row(value.topic, record.get("kafka_partition"), record.get("kafka_offset"), reason,
                                    value.payload, JOB)

    def on_timer(self, timestamp, ctx):
        ranker, tracker = self.models.value() or (SuspectRanker(self.policy), TopologyTracker(self.vanish_after_windows))
        for end, batch in self.windows.closed(timestamp):
            yield from self._window(ranker, tracker, batch)
            self.ranked_through.update(end)
        self.models.update((ranker, tracker))

    @staticmethod
    def _window(ranker: SuspectRanker, tracker: TopologyTracker, batch: dict):
        services = service_windows(batch["service_windows"])
        edges = sorted(batch["edges"], key=lambda e: (e["caller"], e["callee"]))
        if services:
            verdict = ranker.observe(services, ranked_edges(edges))
            for rank, s in enumerate(verdict.suspects, 1):
                yield Row(s.service, verdict.window_start_ms, verdict.window_end_ms, rank, s.score, s.confidence,
                          s.flagged, verdict.threshold, json.dumps(s.evidence, sort_keys=True, default=str))
        if edges:
            start, end = edges[0]["window_start_ms"], edges[0]["window_end_ms"]
            snapshot, events = tracker.observe(start, end, [
                EdgeSeen(e["caller"], e["callee"], e["callee_virtual"], e["calls"],
                         e["client_errors"] + e["server_errors"], e["latency_p95_ms"], e.get("retries") or 0)
                for e in edges])
            yield SNAPSHOTS, Row(snapshot["window_end_ms"], snapshot["window_start_ms"], snapshot["services"],
                                 snapshot["entry_points"], snapshot["depth"], json.dumps(snapshot["edges"]))
            for e in events:
                yield EDGE_EVENTS, Row(e["caller"], e["callee"], e["event"], e["window_start_ms"], e["window_end_ms"],
                                       e["first_seen_ms"], e["last_seen_ms"])


def attach(t_env, inserts: Inserts, config, names: dict[str, str], service_windows, sliding_edges) -> None:
    """Rank the windows of the streams of rows `service_windows` and `sliding_edges` (columns as the
    topics'), with the outputs added to `inserts`: from the topics (main, below) or in the span path's
    own job graph (jobs/spans.py), where the windows arrive the moment they close, without a Kafka hop."""
    settings = config.section("pipeline", "suspects")

    def records(role: str, rows):
        return rows.map(lambda r, kind=role, topic=names[role]: Row(kind, topic, r["window_end_ms"],
                                                                    json.dumps(r.as_dict(), default=str)),
                        output_type=RECORD)

    policy = SuspectPolicy(**settings.get("policy", {}))
    verdicts = (records("service_windows", service_windows).union(records("edges", sliding_edges))
                .key_by(lambda r: 0, key_type=Types.INT())
                .process(RankWindows(policy, int(settings["vanish_after_windows"])), output_type=SUSPECT))
    inserts.table("stormwatch_suspects", t_env.from_data_stream(verdicts))
    inserts.table("stormwatch_topology_snapshots", t_env.from_data_stream(verdicts.get_side_output(SNAPSHOTS)))
    inserts.table("stormwatch_edge_events", t_env.from_data_stream(verdicts.get_side_output(EDGE_EVENTS)))
    inserts.table("stormwatch_dead_letters", t_env.from_data_stream(verdicts.get_side_output(DEAD_LETTERS)))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    config = setup(args)
    names, group = topics_and_group(args, config, "suspects")
    # Each input keeps its own offsets: two readers must not share a group.
    variables = catalog.variables(config, names, source_options(args, group),
                                  read_with={role: source_options(args, f"{group}-{role}") for role in INPUTS})

    t_env = stream_table_environment(config, f"stormwatch-{JOB}", args.from_savepoint)
    define(t_env, load_statements([f"tables/{t}" for t in INPUTS.values()] + ["views/sliding_edges"] + OUTPUTS,
                                  variables))
    inserts = Inserts(t_env, config, group)
    attach(t_env, inserts, config, names, t_env.to_data_stream(t_env.from_path(READS["service_windows"])),
           t_env.to_data_stream(t_env.from_path(READS["edges"])))
    inserts.execute(args.bounded)


if __name__ == "__main__":
    main(sys.argv[1:])
