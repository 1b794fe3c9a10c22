"""The span path's per-instance figures: one writer per partition, a mark for each partition it owns."""

import pytest

from jobs.spans import marks_per_writer


@pytest.mark.parametrize("partitions, parallelism, marks", [(2, 2, 1), (2, 1, 2), (5, 2, 3), (8, 4, 2), (1, 1, 1)])
def test_each_writer_marks_every_partition_it_owns(partitions, parallelism, marks):
    assert marks_per_writer("stormwatch_span_instances", partitions, parallelism) == marks


def test_fewer_partitions_than_writers_is_refused_with_the_remedy():
    with pytest.raises(SystemExit, match=r"1 partition\(s\), fewer than the span path's parallelism \(2\).*--partitions 2"):
        marks_per_writer("stormwatch_span_instances", 1, 2)
