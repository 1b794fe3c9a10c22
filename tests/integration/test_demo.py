"""The README's first command as a user runs it: the demo shows spans flattened by Flink live, and
Ctrl-C stops everything it started."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from stormwatch.config import PROJECT_ROOT
from tests.conftest import TEST_CONFIG

pytestmark = pytest.mark.integration

SERVICES = ("gateway", "orchestrator", "llm-inference", "retrieval", "tool-runner")


def test_demo_shows_flattened_spans_and_dead_letters_live_and_stops_on_ctrl_c(kafka):
    demo = subprocess.Popen(
        [sys.executable, "-m", "stormwatch.cli", "--config", str(TEST_CONFIG), "demo", "--rate", "10"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=PROJECT_ROOT,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(demo.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not _shown_everything("".join(lines)):
            time.sleep(1)
    finally:
        demo.send_signal(signal.SIGINT)
        code = demo.wait(timeout=60)
        reader.join(timeout=10)
    out = "".join(lines)
    assert _shown_everything(out), out[-3000:]
    assert code == 0, out[-3000:]  # a clean stop, not a crash
    assert "job flatten_spans stopped" in out
    # The session's broker was running before the demo: the demo leaves it running.
    assert kafka.pid() is not None


def _shown_everything(out: str) -> bool:
    tables = "".join(block for block in out.split("--- last ")[1:] if "spans (" in block)
    return all(f"\n{s} " in tables for s in SERVICES) and "dead letter: no resourceSpans array" in out
