import pytest
from kafka import KafkaProducer

from connectors.kafka import KafkaSettingError, python_client_settings, table_options
from stormwatch.config import Config


def _config(properties: dict) -> Config:
    return Config(path="test.toml", data={"kafka": {"bootstrap_servers": "b1:9092,b2:9092", "properties": properties}})


def test_flink_tables_get_every_property_unchanged_with_the_properties_prefix():
    options = table_options(_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}), "otlp_spans")
    assert "'topic' = 'otlp_spans'" in options
    assert "'properties.bootstrap.servers' = 'b1:9092,b2:9092'" in options
    assert "'properties.security.protocol' = 'SASL_SSL'" in options
    assert "'properties.sasl.mechanism' = 'PLAIN'" in options


def test_quotes_in_values_cannot_break_out_of_the_sql_literal():
    options = table_options(_config({"sasl.jaas.config": "x password='p';"}), "t")
    assert "'properties.sasl.jaas.config' = 'x password=''p'';'" in options


def test_python_clients_get_the_same_settings_under_kafka_python_names():
    settings = python_client_settings(_config({"security.protocol": "SSL", "ssl.cafile": "/ca.pem"}), KafkaProducer)
    assert settings == {"bootstrap_servers": ["b1:9092", "b2:9092"], "security_protocol": "SSL", "ssl_cafile": "/ca.pem"}


def test_a_setting_kafka_python_cannot_honour_is_an_error_not_silently_dropped():
    with pytest.raises(KafkaSettingError, match="sasl.jaas.config"):
        python_client_settings(_config({"sasl.jaas.config": "x"}), KafkaProducer)
