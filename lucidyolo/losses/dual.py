"""Progressive dual-branch loss: ``L = a * L_o2m + (1 - a) * L_o2o``.

``a(epoch) = max(1 - epoch / max(E - 1, 1), 0) * (0.8 - 0.1) + 0.1`` (epoch
0-based, ``E`` = max epochs): the mix moves linearly from (0.8, 0.2) at the
first epoch to (0.1, 0.9) at the last, so early training leans on the dense
one-to-many signal and late training on the NMS-free one-to-one head that is
deployed. The dual-head criterion owns the schedule (``model.alpha_start`` /
``alpha_end``, :meth:`DetectionCriterion.epoch_weight`); the engine asks it for
``a`` at the start of each epoch.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor


def progressive_alpha(epoch: int, max_epochs: int, start: float = 0.8, end: float = 0.1) -> float:
    """The o2m weight ``a`` for a 0-based ``epoch`` of a ``max_epochs`` run.

    Args:
        epoch: 0-based epoch index.
        max_epochs: total epochs ``E`` (>= 1).
        start: weight at epoch 0.
        end: weight at epoch ``E - 1`` and after.

    Returns:
        ``a`` in ``[end, start]``.
    """
    if max_epochs < 1 or epoch < 0:
        raise ValueError(
            f"need epoch >= 0 and max_epochs >= 1, got epoch={epoch}, max_epochs={max_epochs}"
        )
    progress = max(1.0 - epoch / max(max_epochs - 1, 1), 0.0)
    return progress * (start - end) + end


def mix_branches(
    o2m: Mapping[str, Tensor], o2o: Mapping[str, Tensor], alpha: float | Tensor
) -> tuple[Tensor, dict[str, Tensor]]:
    """Mix two branches' loss terms with weight ``alpha`` on o2m.

    Args:
        o2m: terms of the one-to-many branch (``total`` plus named terms).
        o2o: terms of the one-to-one branch, same keys.
        alpha: o2m weight (float or 0-d tensor; a tensor avoids recompiles under torch.compile).

    Returns:
        total: 0-d mixed total (the objective to backpropagate).
        terms: ``o2m/<k>`` and ``o2o/<k>`` for every key, plus the mixed ``<k>``
            for every key except ``total`` and ``num_fg``.
    """
    terms: dict[str, Tensor] = {}
    for name, branch in (("o2m", o2m), ("o2o", o2o)):
        for key, value in branch.items():
            terms[f"{name}/{key}"] = value
    for key in o2m:
        if key not in ("total", "num_fg"):
            terms[key] = alpha * o2m[key] + (1 - alpha) * o2o[key]
    total = alpha * o2m["total"] + (1 - alpha) * o2o["total"]
    return total, terms
