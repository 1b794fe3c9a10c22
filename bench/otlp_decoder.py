"""The `otlp` format's decoder alone (connectors/java/, io.stormwatch.flink.otlp.OtlpDecoder), one thread,
no Kafka or Flink: spans per second for each encoding on the same messages.

Input: generated traces (stormwatch.traffic.generator, fixed seed, as bench/throughput.py
makes them: spans in end-time order, at most 256 per message), each message in both encodings
(connectors.otlp); or, with --trainticket, the real messages of
/work/shared/data/trainticket/*.otlp.jsonl. Needs `make bootstrap` and connectors/java's test classes
(`mvn -f jvm/pom.xml test-compile`, which this runs).

    .venv/bin/python bench/otlp_decoder.py [--spans 200000] [--seconds 10] [--trainticket]
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from connectors.otlp import encode_json, encode_proto  # noqa: E402

WORK = ROOT / "runtime" / "bench" / "otlp_decoder"
BUILD = ROOT / "runtime" / "build" / "otlp-format"  # connectors/java/pom.xml's build directory
TRAINTICKET = ROOT.parent / "shared" / "data" / "trainticket"


def generated(spans_wanted: int) -> list[dict]:
    sys.path.insert(0, str(ROOT / "bench"))
    from throughput import SEED, TRACE_RATE  # the throughput benchmark's traffic
    from stormwatch.traffic.generator import TraceGenerator
    from stormwatch.traffic.otlp import to_export_requests

    spans = []
    for trace in TraceGenerator(seed=SEED).generate(TRACE_RATE):
        spans.extend(trace)
        if len(spans) >= spans_wanted:
            break
    spans.sort(key=lambda s: s.end_unix_nano)
    return [json.loads(encode_json(r)) for r in to_export_requests(spans)]


def write(path: Path, messages: list[bytes]) -> None:
    with path.open("wb") as f:
        for m in messages:
            f.write(struct.pack(">i", len(m)) + m)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--trainticket", action="store_true")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    if args.trainticket:
        requests = [json.loads(line) for f in sorted(TRAINTICKET.glob("*.otlp.jsonl")) for line in f.open() if line.strip()]
    else:
        requests = generated(args.spans)
    write(WORK / "otlp_json.bin", [json.dumps(r, separators=(",", ":")).encode() for r in requests])
    write(WORK / "otlp_proto.bin", [encode_proto(r) for r in requests])

    subprocess.run(["mvn", "--quiet", "--batch-mode", "-f", str(ROOT / "jvm" / "pom.xml"), "test-compile"], check=True)
    cp_file = WORK / "classpath.txt"
    subprocess.run(["mvn", "--quiet", "--batch-mode", "-f", str(ROOT / "connectors" / "java" / "pom.xml"),
                    "dependency:build-classpath", f"-Dmdep.outputFile={cp_file}"], check=True)
    classpath = f"{BUILD / 'test-classes'}:{BUILD / 'classes'}:{cp_file.read_text().strip()}"
    # otlp_proto_classes: the OTLP generated classes instead of ProtoSpans, for comparison.
    for encoding in ("otlp_json", "otlp_proto", "otlp_proto_classes"):
        # One core: the decoder is single-threaded; a serial GC keeps the JVM's own threads out of the way.
        subprocess.run(["taskset", "-c", "0", "java", "-XX:+UseSerialGC", "-Xmx1g", "-cp", classpath,
                        "io.stormwatch.flink.otlp.DecoderBench", encoding, str(WORK / f"{encoding.removesuffix('_classes')}.bin"),
                        str(args.seconds)], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
