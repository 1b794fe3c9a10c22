"""cumulative_buckets(bounds, counts, targets): stormwatch.histograms.cumulative_at as a Flink SQL
function. It runs once per metrics record (one per instance per reporting interval), never per span.

A Python function in thread mode cannot return NULL for an ARRAY (PyFlink fails on None), so a
malformed or missing histogram comes back as an empty array (the targets never are): the SQL calling it
turns that into NULL (CASE WHEN CARDINALITY(...) = 0)."""

from pyflink.table import DataTypes
from pyflink.table.udf import udf

from stormwatch.histograms import cumulative_at



def cumulative_or_empty(bounds, counts, targets) -> list[int]:
    return cumulative_at(bounds, counts, targets) or []


cumulative_buckets = udf(
    cumulative_or_empty,
    input_types=[DataTypes.ARRAY(DataTypes.DOUBLE()), DataTypes.ARRAY(DataTypes.BIGINT()),
                 DataTypes.ARRAY(DataTypes.DOUBLE())],
    result_type=DataTypes.ARRAY(DataTypes.BIGINT()),
    name="cumulative_buckets",
    deterministic=True,
)
