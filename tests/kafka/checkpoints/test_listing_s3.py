"""Listing the manifest store on the S3-API server: pagination, a fresh listing each time, the cost.

No Kafka: the PREPARED index is the store's answer alone (``kafka/checkpoints/store.py``).
Requests are counted on the server side, from moto's request log (``S3Server.requests``).
"""

from __future__ import annotations

from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from kafka_eos_testing.s3_server import seed_manifests

COUNT = 1_050  # more than one ListObjectsV2 page (1,000 keys)
PREPARED = {7, 500, 1_049}


def test_the_prepared_index_pages_through_the_listing_and_sees_a_manifest_written_since(s3_server, s3_base):
    bucket, prefix = s3_base.removeprefix("s3://").split("/", 1)
    seed_manifests(s3_server, bucket, prefix, "paged", list(range(1, COUNT + 1)), prepared=PREPARED)
    store = ManifestStore.configured(s3_base)

    before = s3_server.requests()
    index = store.prepared()
    cost = s3_server.requests() - before
    assert sorted(ref.checkpoint_id for ref in index.values()) == sorted(PREPARED)
    # The pipeline's folder took two pages; every manifest was fetched exactly once.
    assert cost["LIST+"] == 1, cost
    assert cost["GET"] == COUNT, cost

    # Another process writes a PREPARED manifest: this process's next index must list it (a cached
    # listing would miss it, and cleanup would abort the transactions it protects).
    seed_manifests(s3_server, bucket, prefix, "paged", [2_000], prepared={2_000})
    assert sorted(ref.checkpoint_id for ref in store.prepared().values()) == sorted(PREPARED | {2_000})
