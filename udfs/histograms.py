"""cumulative_buckets(bounds, counts, targets): stormwatch.histograms.cumulative_at as a Flink SQL
function. It runs once per metrics record (one per instance per reporting interval), never per span."""

from pyflink.table import DataTypes
from pyflink.table.udf import udf

from stormwatch.histograms import cumulative_at

cumulative_buckets = udf(
    cumulative_at,
    input_types=[DataTypes.ARRAY(DataTypes.DOUBLE()), DataTypes.ARRAY(DataTypes.BIGINT()),
                 DataTypes.ARRAY(DataTypes.DOUBLE())],
    result_type=DataTypes.ARRAY(DataTypes.BIGINT()),
    name="cumulative_buckets",
    deterministic=True,
)
