"""How a job's INSERTs get their sink's delivery options (jobs/common.py)."""

from __future__ import annotations

import pytest

from jobs.common import inserted_table, with_sink_options


def test_the_options_go_on_the_sink_table_as_a_hint():
    statement = "-- INSERT INTO in a comment is not the sink\nINSERT INTO stormwatch_spans\nSELECT * FROM flat"
    hinted = with_sink_options(statement, {"sink.delivery-guarantee": "exactly-once", "k": "it's"})
    assert hinted == ("-- INSERT INTO in a comment is not the sink\nINSERT INTO stormwatch_spans "
                      "/*+ OPTIONS('sink.delivery-guarantee' = 'exactly-once', 'k' = 'it''s') */\nSELECT * FROM flat")


def test_a_quoted_table_name_is_found():
    assert inserted_table("INSERT INTO `health_out` SELECT * FROM `health_out_input_1`") == "health_out"


def test_a_statement_that_inserts_nothing_is_refused():
    with pytest.raises(ValueError, match="not an INSERT"):
        inserted_table("SELECT 1")
