"""Decoded instance-segmentation predictions: box rows plus what assembles their masks.

A mask is never materialised at decode time: each kept row carries its
prototype coefficients and the batch carries the prototypes, so the masks of a
row are built only where a consumer needs them (``lucid eval`` at the original
resolution, the epoch metric and the gate in the network-input frame). The
engine treats this like the tensor a box task's ``decode`` returns: it calls
``.cpu()`` on the batch and indexes one image with ``[i]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass(frozen=True)
class MaskDetections:
    """Box rows, their mask coefficients and the prototypes they combine.

    Attributes:
        rows: ``(B, K, 6)`` ``[x1, y1, x2, y2, score, class]`` in network-input
            pixels, zero-score rows as padding (``(K, 6)`` for one image).
        coeffs: ``(B, K, P)`` mask coefficients (tanh) of each row, zeros on padding.
        protos: ``(B, P, Hp, Wp)`` prototypes; prototype pixel ``(i, j)`` covers
            network-input pixels ``[s*j, s*(j+1)) x [s*i, s*(i+1))`` with
            ``s = H / Hp`` (4 for the YOLO26 prototype net).

    The mask logits of row ``k`` are ``coeffs[k] @ protos.flatten(1)``; the mask
    is ``sigmoid > 0.5`` (logit ``> 0``) inside the row's box.
    """

    rows: Tensor
    coeffs: Tensor
    protos: Tensor

    def cpu(self) -> MaskDetections:
        return MaskDetections(self.rows.cpu(), self.coeffs.cpu(), self.protos.cpu())

    def to(self, device: object) -> MaskDetections:
        return MaskDetections(self.rows.to(device), self.coeffs.to(device), self.protos.to(device))

    def image(self, i: int) -> MaskDetections:
        """One image's predictions (``rows (K, 6)``, ``coeffs (K, P)``, ``protos (P, Hp, Wp)``)."""
        return MaskDetections(self.rows[i], self.coeffs[i], self.protos[i])

    def __getitem__(self, i: int) -> MaskDetections:
        # The engine indexes a decoded batch by image, as it does a (B, K, 6) tensor.
        return self.image(i)
