"""The hot code of a Java Flight Recorder file: where the sampled threads were, by method (self: the
top frame) and by class (inclusive: anywhere on the stack), as shares of all execution samples.

    .venv/bin/python bench/jfr_top.py FILE.jfr [--top 25] [--threads "assemble traces"]

bench/throughput.py --profile DIR records the span path's TaskManager and writes this summary beside
its results. Reads `jfr print --json --events jdk.ExecutionSample` (the JDK's own `jfr` tool).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path


def samples(path: Path) -> list[dict]:
    jfr = shutil.which("jfr")
    if jfr is None:
        raise SystemExit("no `jfr` on PATH: it comes with the JDK")
    out = subprocess.run([jfr, "print", "--json", "--stack-depth", "64", "--events", "jdk.ExecutionSample", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["recording"]["events"]


def frame_name(frame: dict) -> tuple[str, str]:
    method = frame["method"]
    cls = method["type"]["name"].replace("/", ".")
    return cls, f"{cls}.{method['name']}"


def summary(events: list[dict], top: int = 25, thread: str | None = None) -> list[str]:
    selves, classes, threads, packages = Counter(), Counter(), Counter(), Counter()
    n = 0
    for event in events:
        name = (event["values"].get("sampledThread") or {}).get("javaName") or "?"
        if thread and thread not in name:
            continue
        frames = (event["values"].get("stackTrace") or {}).get("frames") or []
        if not frames:
            continue
        n += 1
        threads[name.split(" (")[0]] += 1
        cls, method = frame_name(frames[0])
        selves[method] += 1
        packages[".".join(cls.split(".")[:4])] += 1
        classes.update({frame_name(f)[0] for f in frames})
    if not n:
        return ["no execution samples" + (f" on threads named like {thread!r}" if thread else "")]

    def table(title: str, counts: Counter) -> list[str]:
        return [f"| {title} | share of samples |", "|---|---|",
                *(f"| `{k}` | {v / n:.1%} |" for k, v in counts.most_common(top)), ""]

    return [f"{n:,} execution samples" + (f" on threads named like {thread!r}" if thread else ""), "",
            *table("thread", threads), *table("package (self, first four parts)", packages),
            *table("method (self)", selves), *table("class (anywhere on the stack)", classes)]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--threads", default=None, help="only threads whose name contains this")
    args = parser.parse_args(argv)
    print("\n".join(summary(samples(args.file), args.top, args.threads)))


if __name__ == "__main__":
    main(sys.argv[1:])
