"""A second development environment on another PySpark (the Spark 3.5 test pass uses it).

    python scripts/spark_venv.py 3.5     # prints the interpreter of .venv-spark3.5, made if needed

The environment is this project (editable) with its test extra and the [spark] extra at the
asked PySpark line, made with uv from its cache (seconds when warm). The Spark provider's
``pyspark-client`` (always 4.x) is left out with an override: it writes the same ``pyspark``
package as PySpark 3.5 and would mix two versions' files (docs/dependencies.md). Re-installed
only when the dependency declaration changes (a stamp of pyproject.toml, testing/pyproject.toml and the
version line).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_PYSPARK_CLIENT = "pyspark-client ; sys_platform == 'never'\n"


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(found).exists():
        raise SystemExit("spark_venv: uv is needed (./run installs it into .venv)")
    return found


def ensure(line: str, *, timeout_s: float = 900) -> Path:
    """The interpreter of ``.venv-spark<line>`` with ``pyspark==<line>.*``, made or updated."""
    venv = ROOT / f".venv-spark{line}"
    python = venv / "bin" / "python"
    declarations = ("pyproject.toml", "testing/pyproject.toml")
    declared = b"".join((ROOT / name).read_bytes() for name in declarations)
    # how it is installed is in the stamp too: a venv made before its compileall step is redone once
    how = b"compileall"
    stamp = venv / f".installed-{hashlib.sha256(declared + line.encode() + how).hexdigest()[:16]}"
    if stamp.exists() and python.exists():
        return python
    uv = _uv()
    if not python.exists():
        subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, timeout=timeout_s)
    override = venv / "overrides.txt"
    override.write_text(NO_PYSPARK_CLIENT)
    print(f"spark_venv: installing the project with PySpark {line}.* into {venv.name}", file=sys.stderr)
    subprocess.run(
        [uv, "pip", "install", "-q", "-p", str(python), "-e", f"{ROOT}[spark]",
         "-e", f"{ROOT}/testing[s3]", "--group", f"{ROOT / 'pyproject.toml'}:test", f"pyspark=={line}.*",
         "--override", str(override)],
        check=True, timeout=timeout_s,
    )  # fmt: skip
    # bytecode, once, as ./run does for .venv (PYTHONDONTWRITEBYTECODE would leave it uncompiled)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    subprocess.run([str(python), "-m", "compileall", "-q", "-j", "0", purelib], capture_output=True,
                   timeout=timeout_s)  # exit 1 for a few files that are not Python 3: not an error here
    for old in venv.glob(".installed-*"):
        old.unlink()
    stamp.touch()
    return python


if __name__ == "__main__":
    print(ensure(sys.argv[1] if len(sys.argv) > 1 else "3.5"))
