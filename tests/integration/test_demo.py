"""The README's first command, shortened: the demo runs end to end and shows flattened spans live."""

from __future__ import annotations

import pytest

from tests.conftest import stormwatch

pytestmark = pytest.mark.integration


def test_demo_shows_generated_spans_flattened_by_flink_and_the_dead_letters(kafka):
    result = stormwatch("demo", "--duration", "60", "--rate", "10", timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "job flatten_spans running on the embedded Flink" in out
    tables = [block for block in out.split("--- last ")[1:] if "spans (" in block]
    assert tables, out[-3000:]
    shown = "".join(tables)
    for service in ("gateway", "orchestrator", "llm-inference", "retrieval", "tool-runner"):
        assert f"\n{service} " in shown, f"{service} never shown"
    assert "dead letter: no resourceSpans array" in out
    assert "job flatten_spans stopped" in out
    # The session's broker was running before the demo: the demo leaves it running.
    assert kafka.pid() is not None
