"""``./run``: each command installs what it needs before it starts (issue 35: ``./run soak --executor
celery`` on a fresh machine stopped with "redis-server was not found", where ``./run test`` installs it).

The script runs for real, with the machine's package manager as the boundary that cannot run here: ``PATH``
holds only the tools the script uses, plus stand-ins for ``java``, ``mvn``, ``id`` (root) and ``apt-get``
(which records what it was asked to install and then provides it). The soak itself is not started: its
``--help`` is the command ``./run`` ends in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("bash", "dirname", "cat", "sha256sum", "cut", "rm", "touch")


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def fresh_machine(tmp_path: Path) -> Path:
    """A ``PATH`` with no redis-server: only the script's tools and the stand-ins."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("./run's .venv is not there (run ./run lint once)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is not on this machine"
        (bin_dir / tool).symlink_to(found)
    _stub(bin_dir, "java", "exit 0")
    _stub(bin_dir, "mvn", "exit 0")
    _stub(bin_dir, "id", "echo 0")
    installed = tmp_path / "apt-get.log"
    _stub(bin_dir, "apt-get", f'echo "$*" >> {installed}\n'
          f'case "$*" in *redis-server*) printf "#!/bin/sh\\nexit 0\\n" > {bin_dir}/redis-server; '
          f'/bin/chmod 755 {bin_dir}/redis-server ;; esac')
    return bin_dir


def _run(bin_dir: Path, *argv: str) -> tuple[subprocess.CompletedProcess, str]:
    python = os.path.realpath(ROOT / ".venv" / "bin" / "python")  # the interpreter the .venv was made from
    env = {"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/root"), "PYTHON": python}
    done = subprocess.run(["/bin/bash", str(ROOT / "run"), *argv], env=env, capture_output=True, text=True,
                          timeout=120)
    log = bin_dir.parent / "apt-get.log"
    return done, log.read_text() if log.exists() else ""


@pytest.mark.parametrize("argv", [("--executor", "celery"), ("--executor=celery", "--minutes", "1"),
                                  ("--profile", "production")])
def test_the_celery_soak_installs_redis_first(fresh_machine, argv):
    done, installed = _run(fresh_machine, "soak", *argv, "--help")
    assert done.returncode == 0, done.stderr
    assert "install -y -qq redis-server" in installed
    assert "usage: ./run soak" in done.stdout


def test_the_local_soak_installs_no_redis(fresh_machine):
    done, installed = _run(fresh_machine, "soak", "--executor", "local", "--help")
    assert done.returncode == 0, done.stderr
    assert "redis-server" not in installed
