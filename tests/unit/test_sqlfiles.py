import re

import pytest

from stormwatch import sqlfiles
from stormwatch.sqlfiles import SqlTemplateError, expand_attribute_lookups, render, statements


def test_attribute_lookup_scans_the_key_value_list_up_to_the_limit():
    sql = expand_attribute_lookups("SELECT ATTRIBUTE_STRING(rs.`resource`.`attributes`, 'service.name') FROM t", limit=3)
    assert "ATTRIBUTE_STRING" not in sql
    assert sql.count("WHEN rs.`resource`.`attributes`[") == 3
    assert "[3].`key` = 'service.name' THEN rs.`resource`.`attributes`[3].`value`.`stringValue`" in sql


def test_placeholders_are_filled_and_a_missing_one_names_file_and_placeholder():
    text = render("tables/stormwatch_dead_letters", {"dead_letters_options": "'connector' = 'kafka'"})
    assert "'connector' = 'kafka'" in text and "${" not in text
    with pytest.raises(SqlTemplateError, match=r"stormwatch_dead_letters.sql: no value for placeholder \$\{dead_letters_options\}"):
        render("tables/stormwatch_dead_letters", {})


def test_dollar_signs_in_regular_expressions_are_left_alone(tmp_path, monkeypatch):
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "ids.sql").write_text("SELECT REGEXP(id, '^[0-9a-fA-F]{32}$') FROM t WHERE x < ${limit}\n")
    monkeypatch.setattr(sqlfiles, "SQL_DIR", tmp_path)
    text = render("views/ids", {"limit": 3600})
    assert "'^[0-9a-fA-F]{32}$'" in text and "x < 3600" in text


def test_statements_split_on_line_ending_semicolons_and_skip_comment_only_parts():
    parts = statements("-- header\nCREATE TABLE a (x INT);\n\n-- just a comment;\nINSERT INTO a SELECT 1;\n")
    assert parts == ["-- header\nCREATE TABLE a (x INT)", "INSERT INTO a SELECT 1"]


# What a file's folder says its statements are.
KINDS = {"tables": r"CREATE (TEMPORARY )?TABLE ", "sinks": r"CREATE (TEMPORARY )?TABLE ",
         "views": r"CREATE (TEMPORARY )?VIEW ", "functions": r"CREATE (TEMPORARY )?(SYSTEM )?FUNCTION ",
         # A job's statements: INSERTs, or a view `*_out` of an output the job sends to more than one
         # place (the span path: its topic and, in the same job graph, the suspects ranker).
         "jobs": r"(INSERT INTO |CREATE TEMPORARY VIEW \w+_out AS)"}


def test_every_sql_file_renders_with_its_placeholders_supplied():
    paths = sorted(sqlfiles.SQL_DIR.rglob("*.sql"))
    assert {p.relative_to(sqlfiles.SQL_DIR).parts[0] for p in paths} == set(KINDS) and len(paths) > 40
    for path in paths:
        name = str(path.relative_to(sqlfiles.SQL_DIR).with_suffix(""))
        needed = set(re.findall(r"\$\{([a-z_][a-z0-9_]*)\}", path.read_text()))
        text = render(name, {n: "x" for n in needed})
        parts = statements(text)
        # One statement per code line that ends in `;`, counted here on the rendered text.
        ends = [line for line in text.splitlines() if line.rstrip().endswith(";") and not line.lstrip().startswith("--")]
        assert len(parts) == len(ends) >= 1, (name, len(parts), len(ends))
        for part in parts:
            code = "\n".join(line for line in part.splitlines() if not line.lstrip().startswith("--")).strip()
            assert re.match(KINDS[name.split("/")[0]], code, re.IGNORECASE), (name, code[:80])
            assert "${" not in part and not code.endswith(";"), (name, code[-80:])


def test_cumulative_counts_become_one_bucket_sum_per_bound():
    sql = sqlfiles.expand_cumulative_counts("SELECT CUMULATIVE_COUNTS(latency_ms, 1.0, 2.5) FROM t")
    assert sql == ("SELECT ARRAY[CAST(SUM(CASE WHEN latency_ms <= 1.0 THEN 1 ELSE 0 END) AS BIGINT), "
                   "CAST(SUM(CASE WHEN latency_ms <= 2.5 THEN 1 ELSE 0 END) AS BIGINT)] FROM t")


def test_bucket_arrays_split_cumulative_counts_into_a_row_part_and_an_aggregate_part():
    row = sqlfiles.expand_bucket_arrays("SELECT CUMULATIVE_INDICATORS(duration_ms, 1.0, 2.5) FROM t")
    assert row == ("SELECT ARRAY[CAST(CASE WHEN duration_ms <= 1.0 THEN 1 ELSE 0 END AS BIGINT), "
                   "CAST(CASE WHEN duration_ms <= 2.5 THEN 1 ELSE 0 END AS BIGINT)] FROM t")
    total = sqlfiles.expand_bucket_arrays("SELECT SUM_ELEMENTS(buckets, 2) FROM t")
    assert total == ("SELECT ARRAY[CAST(COALESCE(SUM(buckets[1]), 0) AS BIGINT), "
                     "CAST(COALESCE(SUM(buckets[2]), 0) AS BIGINT)] FROM t")


def test_decision_envelope_becomes_the_shared_columns_and_the_kafka_position():
    sql = sqlfiles.expand_decision_envelope("CREATE TABLE t (\n  DECISION_ENVELOPE,\n  `state` STRING\n)")
    lines = sql.splitlines()
    assert lines[1] == "  `decision_id` STRING,"
    assert lines[3].startswith("  `entity` ROW<`kind` STRING, `key` STRING")
    assert lines[-4:] == ["  `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,",
                          "  `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,", "  `state` STRING", ")"]


def test_instance_id_is_the_first_of_the_instance_attributes_a_resource_has():
    sql = sqlfiles.expand_instance_ids("SELECT INSTANCE_ID(r.`attributes`) AS service_instance_id FROM t")
    assert sql == ("SELECT COALESCE(ATTRIBUTE_STRING(r.`attributes`, 'service.instance.id'), "
                   "ATTRIBUTE_STRING(r.`attributes`, 'k8s.pod.name'), ATTRIBUTE_STRING(r.`attributes`, 'host.name'))"
                   " AS service_instance_id FROM t")
