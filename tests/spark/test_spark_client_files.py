"""spark/client_files.py: the connection's certificate and key files travel as bytes inside the job."""

from __future__ import annotations

import os
import pickle
import stat

import pytest

from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.spark.client_files import carry, materialised


def test_files_travel_as_bytes_and_land_private_on_the_executor(tmp_path):
    (tmp_path / "ca.pem").write_bytes(b"CA PEM")
    (tmp_path / "key.pem").write_bytes(b"KEY PEM")
    config = {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SSL",
        "ssl.ca.location": str(tmp_path / "ca.pem"),
        "ssl.key.location": str(tmp_path / "key.pem"),
        "ssl.key.password": "pw",
    }
    carried = pickle.loads(pickle.dumps(carry(config)))  # as Spark ships the closure
    assert "ssl.ca.location" not in carried.settings and str(tmp_path) not in repr(carried.settings)
    assert "KEY PEM" not in repr(carried)
    with materialised(carried) as settings:
        folder = os.path.dirname(settings["ssl.key.location"])
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        for key, content in (("ssl.ca.location", b"CA PEM"), ("ssl.key.location", b"KEY PEM")):
            with open(settings[key], "rb") as handle:
                assert handle.read() == content
            assert stat.S_IMODE(os.stat(settings[key]).st_mode) == 0o600
        assert settings["ssl.key.password"] == "pw" and settings["bootstrap.servers"] == "b:9093"
    assert not os.path.exists(folder)


def test_a_config_without_files_is_unchanged():
    with materialised(carry({"bootstrap.servers": "b:9092"})) as settings:
        assert settings == {"bootstrap.servers": "b:9092"}
    with materialised(carry({"ssl.ca.location": "probe"})) as settings:  # librdkafka's system CA probe
        assert settings == {"ssl.ca.location": "probe"}


def test_an_unreadable_or_directory_location_is_refused_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"key 'ssl.key.location': .*missing.pem cannot be read"):
        carry({"ssl.key.location": str(tmp_path / "missing.pem")})
    with pytest.raises(ConfigError, match=r"key 'ssl.ca.location' is the directory"):
        carry({"ssl.ca.location": str(tmp_path)})
