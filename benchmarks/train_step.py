"""Full training loop (loader + step) vs the bare step of the same model on fixed tensors.

Prints one JSON line. For each (img_size, batch) the full loop runs Lightning's
fit loop over the real training DataLoader (mosaic on, workers auto) and times
each batch after warm-up; the bare step times forward + both assignments + dual
loss + backward + clip + MuSGD + schedule + EMA on the same batches, loaded and
unpacked before timing starts. The
ratio full/bare is what the loop keeps of the machine's limit for this model
(target >= 0.85).

    python benchmarks/train_step.py [--sizes 320,640] [--batches 8,16] [--steps 6] [--tasks det,seg]

With several tasks each point is measured for every task side by side, and the
bare-step cost of each task relative to the first (their steps interleaved) (``step_cost_vs_<task>``:
seconds per image over the first task's) is reported (aim for seg: <= 1.4x det), beside the ratio of
their training-forward FLOPs (``flops_vs_<task>``, torch's FLOP counter, one image, both head
branches): a step bound by arithmetic cannot cost less than that.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

import pytorch_lightning as pl
import torch

from lucidyolo.config.resolve import resolve_config
from lucidyolo.engine.loop.build import build_datamodule, build_system, dataset_meta, open_split
from lucidyolo.engine.loop.ema import ModelEMA
from lucidyolo.engine.loop.fit import quiet_known_warnings
from lucidyolo.structures.packed import unpack
from lucidyolo.tasks.registry import get_task


class _Timer(pl.Callback):
    """Wall time from the start of the first timed batch to the end of the last one.

    Starting at ``on_train_batch_start`` of batch ``warmup`` includes the wait for every
    later batch from the loader; ending at the last ``on_train_batch_end`` excludes the
    fit teardown (worker shutdown, final hooks), which is not per-step cost.
    """

    def __init__(self, warmup: int) -> None:
        self.warmup, self.images, self._t, self._end = warmup, 0, 0.0, 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if batch_idx == self.warmup:
            self._t = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if batch_idx >= self.warmup:
            self.images += len(batch)
            self._end = time.perf_counter()


def full_loop(spec, cfg, train, val, steps: int, warmup: int) -> float:
    dm = build_datamodule(spec, cfg, train, val)
    system = build_system(spec, cfg, len(train.class_names), list(train.class_names), dataset_meta(spec, train),
                          channels_last=True)
    timer = _Timer(warmup)
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, max_epochs=1, limit_train_batches=warmup + steps, limit_val_batches=0,
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        callbacks=[timer], gradient_clip_val=10.0, use_distributed_sampler=False, num_sanity_val_steps=0,
    )
    trainer.fit(system, datamodule=dm)
    return timer.images / (timer._end - timer._t)


class BareStepper:
    """Forward + both assignments + dual loss + backward + clip + MuSGD + schedule + EMA on preloaded batches."""

    def __init__(self, spec, cfg, train, val, count: int) -> None:
        dm = build_datamodule(spec, cfg, train, val)
        dm.setup("fit")
        # channels-last as `lucid fit` builds it on the CPU and CUDA
        self.system = build_system(spec, cfg, len(train.class_names), list(train.class_names),
                                   dataset_meta(spec, train), channels_last=True)
        # the same batches the full loop sees (instance counts vary), decoded before timing starts
        batches = []
        while len(batches) < count:
            batches += [unpack(b, "cpu") for b in dm.train_dataloader()]
        self.batches = [(images.contiguous(memory_format=torch.channels_last), gt, meta)
                        for images, gt, meta in batches[:count]]
        from lucidyolo.optim.musgd import MuSGD
        from lucidyolo.optim.schedule import warmup_linear_schedule

        self.opt = MuSGD(self.system.model.parameters(), lr=0.0025)
        self.sched = warmup_linear_schedule(self.opt, 0, 1000, 0.01)
        self.ema = ModelEMA(self.system.model)
        self.system.model.train()
        self.seconds, self.images = 0.0, 0

    def step(self, i: int, timed: bool) -> None:
        images, gt, _ = self.batches[i]
        t0 = time.perf_counter()
        total, _ = self.system.objective(images, gt, 0.5)
        self.opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(self.system.model.parameters(), 10.0)
        self.opt.step()
        self.sched.step()
        self.ema.update(self.system.model)
        if timed:
            self.seconds += time.perf_counter() - t0
            self.images += images.shape[0]

    @property
    def img_s(self) -> float:
        return self.images / self.seconds


def train_forward_gflops(model: torch.nn.Module, size: int) -> float:
    """GFLOPs of one training-mode forward (both head branches and every training-only stem) of one image."""
    import copy

    from torch.utils.flop_counter import FlopCounterMode

    twin = copy.deepcopy(model).train()  # its BatchNorm statistics move; the timed model's do not
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        twin(torch.zeros(1, 3, size, size))
    return counter.get_total_flops() / 1e9


def bare_steps(steppers: list[BareStepper], steps: int, warmup: int) -> list[float]:
    """Images/s of each stepper, their steps interleaved so a busy moment of the machine hits all alike."""
    for i in range(warmup + steps):
        for st in steppers:
            st.step(i, timed=i >= warmup)
    return [st.img_s for st in steppers]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="320,640")
    parser.add_argument("--batches", default="8,16")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--data-root", default=None, help="default: each task's synthetic set per size")
    parser.add_argument("--tasks", default="det", help="comma-separated tasks, measured side by side")
    parser.add_argument("--bare-only", action="store_true", help="skip the full loop (task cost comparisons)")
    args = parser.parse_args()
    quiet_known_warnings()
    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    specs = [get_task(t) for t in args.tasks.split(",")]
    rows = []
    work = Path(tempfile.mkdtemp(prefix="lucid-bench-"))
    for size in (int(s) for s in args.sizes.split(",")):
        for batch in (int(b) for b in args.batches.split(",")):
            runs = []
            for spec in specs:
                root = (Path(args.data_root) if args.data_root
                        else spec.make_synthetic(work / f"{spec.name}-s{size}", 200, size, 0))
                cfg = resolve_config(spec, [], {"data": {"img_size": size, "batch_size": batch}})
                train = open_split(spec, cfg, root, "train", "train")
                val = open_split(spec, cfg, root, "val", "val")
                runs.append((spec, cfg, train, val, BareStepper(spec, cfg, train, val, args.warmup + args.steps)))
            bare = bare_steps([r[-1] for r in runs], args.steps, args.warmup)
            flops = [train_forward_gflops(r[-1].system.model, size) for r in runs]
            for k, (spec, cfg, train, val, _) in enumerate(runs):
                row = {"task": spec.name, "img_size": size, "batch": batch, "bare_img_s": round(bare[k], 3),
                       "train_forward_gflops": round(flops[k], 3)}
                if k:
                    row[f"step_cost_vs_{specs[0].name}"] = round(bare[0] / bare[k], 3)
                    # a step bound by arithmetic costs what its FLOPs say: the floor of the ratio above
                    row[f"flops_vs_{specs[0].name}"] = round(flops[k] / flops[0], 3)
                if not args.bare_only:
                    full = full_loop(spec, cfg, train, val, args.steps, args.warmup)
                    row.update(full_img_s=round(full, 3), ratio=round(full / bare[k], 3))
                rows.append(row)
    print(json.dumps({"benchmark": "train_step", "variant": "n", "device": "cpu", "threads": torch.get_num_threads(),
                      "cores": os.cpu_count(), "target_ratio": 0.85, "results": rows}))


if __name__ == "__main__":
    main()
