"""An S3-API server (moto, ``kafka_eos_testing/s3_server.py``) for the module, a fresh bucket per test.

The provider reaches it as it reaches any S3 endpoint: through the standard AWS environment
variables, which the fixture sets for the test (s3fs and boto3 read them).

A fixture plugin (``pytest_plugins`` in tests/conftest.py): the manifest store's, the S3 server's and
the Spark job's tests use it from their own folders.
"""

from __future__ import annotations

import pytest

from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.s3_server import S3Server


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    with S3Server(log_path=tmp_path_factory.mktemp("s3") / "s3-server.log") as server:
        yield server


@pytest.fixture
def s3_base(s3_server, monkeypatch) -> str:
    """``s3://<new bucket>/manifests``, with the AWS environment pointing at the test server."""
    import s3fs

    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()  # an instance cached for another endpoint must not serve
    bucket = unique_name("eos-store").lower().replace("_", "-")[:60]
    return s3_server.create_bucket(bucket) + "/manifests"
