import pytest
from kafka import KafkaAdminClient, KafkaProducer

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


def test_producer_settings_reach_the_producer_as_numbers_and_are_left_by_the_other_clients():
    properties = {"delivery.timeout.ms": "5000", "retries": "10", "enable.idempotence": "true", "acks": "all"}
    assert python_client_settings(_config(properties), KafkaProducer) == {
        "bootstrap_servers": ["b1:9092", "b2:9092"], "delivery_timeout_ms": 5000, "retries": 10,
        "enable_idempotence": True, "acks": "all"}
    assert python_client_settings(_config(properties), KafkaAdminClient) == {"bootstrap_servers": ["b1:9092", "b2:9092"]}


def test_a_setting_kafka_python_cannot_honour_is_an_error_not_silently_dropped():
    with pytest.raises(KafkaSettingError, match="sasl.jaas.config") as error:
        python_client_settings(_config({"sasl.jaas.config": "com.example.Kerberos required secret=\"s3cret\";"}),
                               KafkaProducer)
    assert "s3cret" not in str(error.value)


@pytest.mark.parametrize("module", ["plain.PlainLoginModule", "scram.ScramLoginModule"])
def test_sasl_credentials_in_a_jaas_line_reach_kafka_python_as_its_own_settings(module):
    jaas = f'org.apache.kafka.common.security.{module} required username="svc" password="p\\"w;d";'
    settings = python_client_settings(_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                               "sasl.jaas.config": jaas}), KafkaProducer)
    assert settings["sasl_plain_username"] == "svc"
    assert settings["sasl_plain_password"] == 'p"w;d'
    assert settings["sasl_mechanism"] == "PLAIN"


def test_flink_jobs_get_kafkas_login_modules_where_the_sql_connector_relocated_them():
    plain = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
    options = table_options(_config({"sasl.jaas.config": plain}), "t")
    assert ("'properties.sasl.jaas.config' = 'org.apache.flink.kafka.shaded.org.apache.kafka.common.security.plain."
            "PlainLoginModule required username=\"u\" password=\"p\";'") in options
    relocated = "org.apache.flink.kafka.shaded." + plain
    assert relocated.replace("'", "''") in table_options(_config({"sasl.jaas.config": relocated}), "t")
    custom = 'com.example.Login required token="t";'
    assert custom in table_options(_config({"sasl.jaas.config": custom}), "t")


def test_pem_stores_reach_kafka_python_as_its_files():
    settings = python_client_settings(_config({
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "/client.pem", "ssl.key.password": "k",
        "ssl.endpoint.identification.algorithm": ""}), KafkaProducer)
    assert settings == {"bootstrap_servers": ["b1:9092", "b2:9092"], "security_protocol": "SSL", "ssl_cafile": "/ca.pem",
                        "ssl_certfile": "/client.pem", "ssl_password": "k", "ssl_check_hostname": False}


def test_a_jks_store_has_no_kafka_python_equivalent():
    with pytest.raises(KafkaSettingError, match="ssl.truststore.location"):
        python_client_settings(_config({"ssl.truststore.location": "/ts.jks", "ssl.truststore.password": "x"}),
                               KafkaProducer)
