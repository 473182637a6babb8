"""Decoded keypoint predictions: box rows plus each row's K points.

The engine treats this like the tensor a box task's ``decode`` returns: it
calls ``.cpu()`` on the batch and indexes one image with ``[i]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass(frozen=True)
class KeypointDetections:
    """Box rows and their keypoints.

    Attributes:
        rows: ``(B, N, 6)`` ``[x1, y1, x2, y2, score, class]`` in network-input
            pixels, zero-score rows as padding (``(N, 6)`` for one image).
        keypoints: ``(B, N, K, 3)`` ``[x, y, confidence]`` per point, network-input
            pixels; ``confidence = 1 - mean(sigma_x, sigma_y)`` in ``(0, 1)`` from the
            predicted (sigmoid) scales; zeros on padding rows (``(N, K, 3)`` for one image).
    """

    rows: Tensor
    keypoints: Tensor

    def cpu(self) -> KeypointDetections:
        return KeypointDetections(self.rows.cpu(), self.keypoints.cpu())

    def to(self, device: object) -> KeypointDetections:
        return KeypointDetections(self.rows.to(device), self.keypoints.to(device))

    def image(self, i: int) -> KeypointDetections:
        """One image's predictions (``rows (N, 6)``, ``keypoints (N, K, 3)``)."""
        return KeypointDetections(self.rows[i], self.keypoints[i])

    def __getitem__(self, i: int) -> KeypointDetections:
        # The engine indexes a decoded batch by image, as it does a (B, N, 6) tensor.
        return self.image(i)
