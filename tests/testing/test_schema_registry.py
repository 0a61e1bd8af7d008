"""The Schema Registry launcher: Apicurio on loopback, answering confluent-kafka's client.

The registry is the real server the provider's registry code is tested against
(tests/kafka/registry/); these tests prove the launcher's promises before anything relies on them.
"""

from __future__ import annotations

import ipaddress
import os
import pathlib

import pytest

from kafka_eos_testing import schema_registry as launcher

pytest.importorskip("confluent_kafka.schema_registry")


def _listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket the process listens on, from /proc (Linux)."""
    inodes = set()
    for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in pathlib.Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            hex_addr, hex_port = local.split(":")
            raw = bytes.fromhex(hex_addr)
            # /proc prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            address = ipaddress.ip_address(raw)
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
                address = address.ipv4_mapped
            found.add((str(address), int(hex_port, 16)))
    return found


def test_registry_listens_on_loopback_only(schema_registry):
    listening = _listening_addresses(schema_registry.process.pid)
    assert (("127.0.0.1", schema_registry.port)) in listening
    assert all(ipaddress.ip_address(address).is_loopback for address, _ in listening), listening


def test_confluent_client_registers_and_reads_back(schema_registry, registry_topic):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": schema_registry.url})
    schema = Schema('{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}', "AVRO")
    schema_id = client.register_schema(f"{registry_topic}-value", schema)
    assert client.get_schema(schema_id).schema_str.replace(" ", "") == schema.schema_str
    assert f"{registry_topic}-value" in client.get_subjects()
    assert client.get_latest_version(f"{registry_topic}-value").schema_id == schema_id


def test_cache_without_its_marker_is_fetched_again(tmp_path, monkeypatch):
    """A half-unpacked cache (no COMPLETE) is not used: the fetch runs instead (here: refused early)."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / f"apicurio-registry-app-{launcher.APICURIO_VERSION}-runner.jar").write_text("")
    monkeypatch.setattr(launcher.shutil, "which", lambda name: None)  # boundary: no Maven on PATH
    with pytest.raises(launcher.RegistryFetchError, match=r"Maven \(mvn\) is not installed"):
        launcher.fetch_registry(tmp_path)
