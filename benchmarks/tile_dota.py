"""DOTA tiler throughput, serial vs a 2-process pool, in one run; prints ONE JSON line.

Tiles the DOTA-v1.0 examples (``../shared/data/dota_v1_examples``, a flat
root tiled as split ``train``) or ``--root`` twice into temporary folders:
once serially and once with ``--workers`` processes (spawn pool start-up
included), then compares every output file byte for byte.

Output: ``{serial_s, workers2_s, speedup, scenes, tiles, identical}`` (the
``workers2_s`` key keeps its name for other ``--workers`` values; ``workers``
says how many were used).

Usage: ``python benchmarks/tile_dota.py [--root DIR] [--splits train] [--patch 1024] [--overlap 200] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from lucidyolo.data.dota.tiler import tile_dota


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def main() -> None:
    default = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dota_v1_examples"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=default)
    ap.add_argument("--splits", default="train")
    ap.add_argument("--patch", type=int, default=1024)
    ap.add_argument("--overlap", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--suffix", default="png")
    args = ap.parse_args()
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    kw = {"patch": args.patch, "overlap": args.overlap, "suffix": args.suffix}
    with tempfile.TemporaryDirectory(prefix="tile-bench-") as tmp:
        t = time.perf_counter()
        serial = tile_dota(args.root, Path(tmp) / "serial", splits, workers=0, **kw)
        serial_s = time.perf_counter() - t
        t = time.perf_counter()
        tile_dota(args.root, Path(tmp) / "pool", splits, workers=args.workers, **kw)
        pool_s = time.perf_counter() - t
        a, b = _files(Path(tmp) / "serial"), _files(Path(tmp) / "pool")
        identical = list(a) == list(b) and all(a[k] == b[k] for k in a)
    print(
        json.dumps(
            {
                "serial_s": round(serial_s, 3),
                "workers2_s": round(pool_s, 3),
                "speedup": round(serial_s / pool_s, 3),
                "scenes": serial.total("scenes"),
                "tiles": serial.total("tiles"),
                "identical": identical,
                "workers": args.workers,
                "objects": serial.total("objects"),
                "output_files": len(a),
            }
        )
    )


if __name__ == "__main__":  # the spawn pool re-imports this file in every worker
    main()
