"""How a job's Kafka sources start: the consumer group's offsets, the beginning, or a point in time
(what `stormwatch demo` uses so that one run never reads another's records)."""

import pytest

from jobs.common import parse_args, source_options
from stormwatch.demo import _reading_from


def test_by_default_a_job_continues_from_its_consumer_group():
    options = source_options(parse_args("", []), "g")
    assert options["scan.startup.mode"] == "group-offsets"
    assert options["properties.group.id"] == "g"
    assert "scan.startup.timestamp-millis" not in options


def test_from_a_timestamp_each_partition_starts_at_its_first_record_written_since():
    options = source_options(parse_args("", ["--from-timestamp", "1796694334572"]), "g")
    assert options["scan.startup.mode"] == "timestamp"
    assert options["scan.startup.timestamp-millis"] == "1796694334572"


def test_a_start_time_and_the_beginning_cannot_both_be_asked_for(capsys):
    with pytest.raises(SystemExit):
        parse_args("", ["--from-earliest", "--from-timestamp", "1"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_demo_says_whether_it_starts_fresh_and_from_when():
    fresh = _reading_from(1796694334572, resume=False)
    assert "fresh run" in fresh and "01:45:34 UTC" in fresh and "--resume" in fresh
    assert "records of earlier runs" in _reading_from(1796694334572, resume=True)
