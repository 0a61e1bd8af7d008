"""``kafka-eos-devbroker`` as users run it: one ``listening on`` line, loopback, clean exit on signals."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]

DEVBROKER = str(pathlib.Path(sys.executable).with_name("kafka-eos-devbroker"))


def start(*args: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([DEVBROKER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, process.stdout.readline()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_prints_one_listening_line_serves_and_exits_zero_on_signal(sig):
    process, line = start("--listen", "127.0.0.1:0", "--partitions", "3")
    try:
        assert line.startswith("listening on 127.0.0.1:"), line
        bootstrap = line.split()[-1]
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        assert [b.port for b in metadata.brokers.values()] == [int(bootstrap.rsplit(":", 1)[1])]
        process.send_signal(sig)
        stdout, _stderr = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert stdout == ""  # exactly one line in total: the one read above


def test_listens_on_loopback_by_default():
    process, line = start()
    try:
        assert line.startswith("listening on 127.0.0.1:"), line
    finally:
        process.terminate()
        process.communicate(timeout=15)
    assert process.returncode == 0


def test_bad_listen_address_is_a_usage_error():
    result = subprocess.run([DEVBROKER, "--listen", "nowhere"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "expected HOST:PORT" in result.stderr
    assert result.stdout == ""


def test_port_in_use_and_data_dir_in_use_are_clear_startup_errors(tmp_path):
    data_dir = str(tmp_path / "data")
    process, line = start("--data-dir", data_dir)
    try:
        port = line.split(":")[-1].strip()
        busy_port = subprocess.run(
            [DEVBROKER, "--listen", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=30
        )
        busy_dir = subprocess.run(
            [DEVBROKER, "--data-dir", data_dir], capture_output=True, text=True, timeout=30
        )
    finally:
        process.terminate()
        process.communicate(timeout=15)
    assert busy_port.returncode == 1 and busy_port.stdout == ""
    assert f"cannot listen on 127.0.0.1:{port}" in busy_port.stderr
    assert busy_dir.returncode == 1 and busy_dir.stdout == ""
    assert "in use by another running broker" in busy_dir.stderr
    # once the first broker is gone the data dir is free again
    again, line = start("--data-dir", data_dir)
    again.terminate()
    again.communicate(timeout=15)
    assert line.startswith("listening on ")


def test_unreadable_acl_file_is_a_startup_error(tmp_path):
    acl_file = tmp_path / "acls.json"
    acl_file.write_text("{not json")
    result = subprocess.run(
        [DEVBROKER, "--acl-file", str(acl_file)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "cannot read the ACL file" in result.stderr
