"""The plugin's synthetic set: coloured dots on grey, a standard YOLO folder whose rows are ``c x y``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

COLOURS = [(230, 40, 40), (40, 80, 230)]  # class 0 red, class 1 blue


def make_synthetic(out_dir: Path | str, num_images: int = 32, img_size: int = 128, seed: int = 0, **_: object) -> Path:
    """Write ``num_images`` images (a quarter of them, at least one, for val) and return the root."""
    root = Path(out_dir)
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    (root / "data.yaml").write_text("train: images/train\nval: images/val\nnames: [red, blue]\n")
    n_val = max(1, num_images // 4)
    for split, n in (("train", num_images - n_val), ("val", n_val)):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            img = Image.new("RGB", (img_size, img_size), (120, 120, 120))
            d = ImageDraw.Draw(img)
            rows = []
            for _ in range(int(rng.integers(1, 4))):
                c = int(rng.integers(0, 2))
                x, y = rng.uniform(12, img_size - 12, 2)
                d.ellipse((x - 6, y - 6, x + 6, y + 6), fill=COLOURS[c])
                rows.append(f"{c} {x / img_size:.6f} {y / img_size:.6f}")
            img.save(root / "images" / split / f"{i:03d}.png")
            (root / "labels" / split / f"{i:03d}.txt").write_text("\n".join(rows) + "\n")
    return root
