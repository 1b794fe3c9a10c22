import pytest

from stormwatch.histograms import cumulative_at, quantile_from_cumulative


def test_counts_accumulate_at_each_target():
    # buckets: <=10: 1, (10,50]: 2, (50,100]: 3, >100: 4
    assert cumulative_at([10, 50, 100], [1, 2, 3, 4], [5, 10, 50, 75, 100, 1000]) == [0, 1, 3, 3, 6, 6]


def test_a_bucket_straddling_a_target_is_not_counted_there():
    # (10, 50] may hold values above 25: counting them at 25 would understate latency.
    assert cumulative_at([10, 50], [1, 1, 0], [25]) == [1]


def test_malformed_histograms_are_refused():
    assert cumulative_at([10, 50], [1, 2], [10]) is None  # one count short
    assert cumulative_at([50, 10], [1, 2, 3], [10]) is None  # bounds not ascending
    assert cumulative_at([10], [1, -1], [10]) is None
    assert cumulative_at(None, [1], [10]) is None


def test_the_sql_function_gives_an_empty_array_where_there_is_no_histogram():
    from udfs.histograms import cumulative_or_empty

    assert cumulative_or_empty([5.0], [1, 2], [1.0, 10.0]) == [0, 1]
    assert cumulative_or_empty([5.0], [1], [1.0, 10.0]) == []
    assert cumulative_or_empty(None, None, [1.0]) == []


def test_quantile_interpolates_inside_the_bucket():
    bounds = [10.0, 20.0, 40.0]
    assert quantile_from_cumulative(bounds, [50, 100, 100], 0.5) == pytest.approx(10.0)
    assert quantile_from_cumulative(bounds, [50, 100, 100], 0.75) == pytest.approx(15.0)
    assert quantile_from_cumulative(bounds, [0, 0, 100], 0.5) == pytest.approx(30.0)
    assert quantile_from_cumulative(bounds, [100, 100, 100], 0.25) == pytest.approx(2.5)


def test_quantile_above_the_last_bound_is_the_last_bound():
    # 10 of 20 calls are above 40 ms: in no `le` bucket, only in the total.
    assert quantile_from_cumulative([10.0, 40.0], [10, 10], 0.9, total=20) == pytest.approx(40.0)
    assert quantile_from_cumulative([10.0, 40.0], [10, 10], 0.25, total=20) == pytest.approx(5.0)
    assert quantile_from_cumulative([10.0, 40.0], [10, 10], 1.0) == pytest.approx(10.0)
    assert quantile_from_cumulative([10.0, 40.0], [], 0.5) is None
    assert quantile_from_cumulative([10.0, 40.0], [0, 0], 0.5) is None
