"""deploy/otel-collector.yaml writes what stormwatch reads: the topics and encodings of its kafka exporter
are the ones config/stormwatch.toml and stormwatch.catalog name (no Collector needed)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from connectors.otlp import ENCODINGS
from stormwatch import catalog
from stormwatch.config import load

ROOT = Path(__file__).resolve().parents[2]
COLLECTOR = yaml.safe_load((ROOT / "deploy" / "otel-collector.yaml").read_text())
CONFIG = load(ROOT / "config" / "stormwatch.toml")
TOPICS = catalog.topics(CONFIG)
# What the kafka exporter writes unless told otherwise (otelcol-contrib's kafkaexporter README, `encoding`).
EXPORTER_DEFAULT = "otlp_proto"


def kafka_exporters(pipeline: str) -> list[dict]:
    """The kafka exporters (`kafka`, `kafka/<name>`) the pipeline of a signal writes through."""
    names = COLLECTOR["service"]["pipelines"][pipeline]["exporters"]
    return [COLLECTOR["exporters"][n] for n in names if n.split("/")[0] == "kafka"]


def topic_and_encoding(exporter: dict, signal: str) -> tuple[str, str]:
    # otelcol-contrib v0.124.0+: per signal; no fallback to the deprecated top-level keys, so a file
    # mixing both is noticed here.
    assert "topic" not in exporter and "encoding" not in exporter, "use traces:/metrics: topic and encoding"
    return exporter[signal]["topic"], exporter[signal]["encoding"]


def test_traces_go_to_the_span_paths_topic_in_an_encoding_it_reads():
    (exporter,) = kafka_exporters("traces")
    topic, encoding = topic_and_encoding(exporter, "traces")
    assert topic == TOPICS["source"] == CONFIG.get("pipeline", "spans", "source_topic")
    assert encoding in ENCODINGS
    # By default the span path reads either encoding, message by message: the exporter's default, otlp_proto, works.
    assert CONFIG.get("pipeline", "spans", "encoding") == "auto"
    assert encoding == EXPORTER_DEFAULT


def test_metrics_go_to_the_health_jobs_otlp_topic_as_json():
    (exporter,) = kafka_exporters("metrics")
    topic, encoding = topic_and_encoding(exporter, "metrics")
    assert topic == TOPICS["otlp_metrics"] == CONFIG.get("pipeline", "health", "otlp_metrics_topic")
    # The health job's table of that topic reads JSON, nothing else.
    table = (ROOT / "sql" / "tables" / "otlp_metrics.sql").read_text()
    assert re.search(r"'format'\s*=\s*'json'", table)
    assert encoding == "otlp_json"


def test_topics_are_ones_the_project_creates():
    for pipeline, signal in (("traces", "traces"), ("metrics", "metrics")):
        for exporter in kafka_exporters(pipeline):
            assert exporter[signal]["topic"] in CONFIG.topics


def test_brokers_are_the_configured_ones():
    for pipeline in ("traces", "metrics"):
        for exporter in kafka_exporters(pipeline):
            assert exporter["brokers"] == CONFIG.bootstrap_servers.split(",")


def test_pipelines_receive_otlp_and_batch():
    receiver = COLLECTOR["receivers"]["otlp"]["protocols"]
    assert set(receiver) == {"grpc", "http"}
    for pipeline in ("traces", "metrics"):
        wiring = COLLECTOR["service"]["pipelines"][pipeline]
        assert wiring["receivers"] == ["otlp"]
        assert wiring["processors"] == ["batch"]
        assert kafka_exporters(pipeline)
    # Every component a pipeline names is defined.
    for wiring in COLLECTOR["service"]["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            for name in wiring.get(kind, []):
                assert name in COLLECTOR[kind], f"{kind}: {name}"


def test_batches_stay_below_the_message_limit():
    batch = COLLECTOR["processors"]["batch"]
    assert batch["send_batch_size"] <= batch["send_batch_max_size"]
    # No more spans per message than the generator writes, twice over.
    assert batch["send_batch_max_size"] <= 2 * CONFIG.get("pipeline", "generator", "max_spans_per_message")
