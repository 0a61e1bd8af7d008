"""The S3-API server itself implements the conditional writes the manifest store relies on.

Checked against the raw API (boto3), before any provider test relies on the server: a server that
silently ignored ``If-None-Match`` or ``If-Match`` would make every store test below pass for the
wrong reason.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError


def _status(err: ClientError) -> int:
    return err.response["ResponseMetadata"]["HTTPStatusCode"]


def test_put_if_none_match_creates_once_and_refuses_an_existing_key(s3_server):
    client = s3_server.client()
    client.create_bucket(Bucket="selftest-create")
    client.put_object(Bucket="selftest-create", Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        client.put_object(Bucket="selftest-create", Key="k", Body=b"second", IfNoneMatch="*")
    assert _status(err.value) == 412 and err.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket="selftest-create", Key="k")["Body"].read() == b"first"


def test_put_if_match_replaces_only_the_version_read(s3_server):
    client = s3_server.client()
    client.create_bucket(Bucket="selftest-cas")
    etag = client.put_object(Bucket="selftest-cas", Key="k", Body=b"v1")["ETag"]
    newer = client.put_object(Bucket="selftest-cas", Key="k", Body=b"v2", IfMatch=etag)["ETag"]
    with pytest.raises(ClientError) as err:
        client.put_object(Bucket="selftest-cas", Key="k", Body=b"stale", IfMatch=etag)
    assert _status(err.value) == 412
    assert client.get_object(Bucket="selftest-cas", Key="k")["Body"].read() == b"v2"
    assert client.head_object(Bucket="selftest-cas", Key="k")["ETag"] == newer
