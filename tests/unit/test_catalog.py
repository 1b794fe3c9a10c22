import pytest

from stormwatch import catalog
from stormwatch.config import DEFAULT_CONFIG, load


def test_intervals_are_day_to_second_literals_whatever_their_length():
    assert catalog.interval(5) == "INTERVAL '0 00:00:05' DAY TO SECOND"
    assert catalog.interval(120) == "INTERVAL '0 00:02:00' DAY TO SECOND"
    assert catalog.interval(90061) == "INTERVAL '1 01:01:01' DAY TO SECOND"
    with pytest.raises(ValueError):
        catalog.interval(1.5)


def test_topic_overrides_name_known_roles_only():
    config = load(DEFAULT_CONFIG)
    names = catalog.topics(config, catalog.parse_topic_overrides(["sink=mine"]))
    assert names["sink"] == "mine" and names["source"] == "otlp_spans"
    with pytest.raises(ValueError, match="unknown topic role"):
        catalog.topics(config, {"nonsense": "x"})
    with pytest.raises(ValueError, match="ROLE=NAME"):
        catalog.parse_topic_overrides(["sink"])


def test_every_output_table_gets_its_topic_and_every_configured_topic_exists():
    config = load(DEFAULT_CONFIG)
    names = catalog.topics(config)
    variables = catalog.variables(config, names, source={})
    for placeholder, role in catalog.OUTPUTS.items():
        assert f"'topic' = '{names[role]}'" in variables[placeholder]
    assert set(names.values()) <= set(config.topics)
