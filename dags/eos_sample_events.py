"""Sample input for the example pipeline: JSON-lines user-activity events, one folder per batch.

``write_batch(input_dir, batch, users=..., seed=...)`` writes ``<input_dir>/<batch>/part-*.json``
and returns the keys the pipeline must write for that batch (``<batch>:<user_id>``, each
exactly once). The demo and the DAG tests use it; replace it with your real input. From a shell:
``python dags/eos_sample_events.py INPUT_DIR [BATCH]``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

EVENT_TYPES = ("view", "search", "add_to_cart", "purchase", "refund", "share")


def write_batch(
    input_dir: str | Path, batch: str, *, users: int = 200, files: int = 3, seed: int = 0
) -> list[str]:
    rng = random.Random(f"{batch}-{seed}")
    folder = Path(input_dir) / batch
    folder.mkdir(parents=True, exist_ok=True)
    lines: list[list[str]] = [[] for _ in range(files)]
    for n in range(users):
        user_id = f"user-{n:05d}"
        for _ in range(rng.randint(1, 6)):
            event_type = rng.choice(EVENT_TYPES)
            amount = round(rng.uniform(1, 200), 2) if event_type in ("purchase", "refund") else 0.0
            event = {
                "user_id": user_id,
                "event_type": event_type,
                "amount": amount,
                "ts": f"{batch}-{n % 3600:04d}",
            }
            rng.choice(lines).append(json.dumps(event))
    for i, chunk in enumerate(lines):
        (folder / f"part-{i:05d}.json").write_text("".join(f"{line}\n" for line in chunk), encoding="utf-8")
    return [f"{batch}:user-{n:05d}" for n in range(users)]


def main(argv: list[str] | None = None) -> int:
    """``python dags/eos_sample_events.py INPUT_DIR [BATCH]``: write one batch (default: now, UTC)."""
    import argparse
    from datetime import datetime, timezone

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("input_dir")
    parser.add_argument("batch", nargs="?", default=datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S"))
    parser.add_argument("--users", type=int, default=200)
    args = parser.parse_args(argv)
    keys = write_batch(args.input_dir, args.batch, users=args.users)
    print(f"wrote batch {args.batch}: {len(keys)} users under {Path(args.input_dir) / args.batch}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
