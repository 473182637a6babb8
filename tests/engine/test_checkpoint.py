"""Checkpoint IO: the safe loader refuses crafted pickles before they run; saves are atomic."""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from lucidyolo.engine.weights.checkpoint import assert_plain, atomic_save, load_checkpoint
from lucidyolo.errors import UserError


class _TouchMarker:
    """Unpickling this runs ``exec`` (a crafted reducer): it creates a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


class _ShellMarker:
    """Same attack through ``os.system``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


@pytest.mark.parametrize("payload", [_TouchMarker, _ShellMarker])
def test_crafted_reducer_is_refused_before_it_runs(tmp_path, payload):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {"w": torch.ones(3)}, "hyper_parameters": payload(marker)}, path)

    with pytest.raises(UserError) as info:
        load_checkpoint(path)
    assert not marker.exists()
    err = info.value
    assert "Refused checkpoint" in err.what and str(path) in err.what
    assert "allowlist" in err.why and "code" in err.why
    assert "trust" in err.fix

    # the payload is real: an unrestricted load does run it (so the refusal above matters)
    torch.load(path, weights_only=False)
    assert marker.exists()


def test_plain_checkpoint_loads_on_cpu(tmp_path):
    ckpt = {
        "state_dict": OrderedDict(w=torch.arange(4.0)),
        "hyper_parameters": {"model": {"variant": "n", "lr": 0.01}, "classes": ["a", "b"]},
        "epoch": 3,
    }
    path = atomic_save(ckpt, tmp_path / "last.ckpt")
    back = load_checkpoint(path)
    assert back["epoch"] == 3
    assert torch.equal(back["state_dict"]["w"], torch.arange(4.0))
    assert back["hyper_parameters"] == ckpt["hyper_parameters"]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "not a (complete) torch checkpoint"),
        (b"definitely not a checkpoint" * 20, "not a (complete) torch checkpoint"),
    ],
)
def test_non_torch_files_are_user_errors(tmp_path, content, words):
    path = tmp_path / "x.ckpt"
    path.write_bytes(content)
    with pytest.raises(UserError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_checkpoint(path)


def test_truncated_checkpoint_is_a_user_error(tmp_path):
    path = tmp_path / "full.ckpt"
    torch.save({"w": torch.randn(1000)}, path)
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(UserError, match="Cannot read checkpoint"):
        load_checkpoint(cut)


def test_missing_file_and_folder_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_checkpoint(tmp_path / "nope.ckpt")
    with pytest.raises(UserError, match="not a file"):
        load_checkpoint(tmp_path)


def test_torch_file_that_is_not_a_dict_is_refused(tmp_path):
    path = tmp_path / "t.pt"
    torch.save(torch.ones(2), path)
    with pytest.raises(UserError, match="not a checkpoint"):
        load_checkpoint(path)


def test_failed_save_leaves_the_previous_file_intact(tmp_path):
    path = tmp_path / "last.ckpt"
    atomic_save({"epoch": 1, "w": torch.ones(3)}, path)
    before = path.read_bytes()
    # torch.save writes the tensor storage, then fails pickling the lambda mid-write
    with pytest.raises(Exception, match="lambda|pickle"):
        atomic_save({"epoch": 2, "w": torch.zeros(10_000), "bad": lambda: 0}, path)
    assert path.read_bytes() == before
    assert load_checkpoint(path)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]  # no temp file left


def test_interrupted_write_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "last.ckpt"
    atomic_save({"epoch": 1}, path)
    before = path.read_bytes()

    def half_write_then_crash(obj, f):
        f.write(b"PK\x03\x04 partial zip bytes")
        raise KeyboardInterrupt  # e.g. Ctrl-C / SIGINT in the middle of the write

    monkeypatch.setattr(torch, "save", half_write_then_crash)
    with pytest.raises(KeyboardInterrupt):
        atomic_save({"epoch": 2}, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def test_atomic_save_creates_parent_folders(tmp_path):
    path = atomic_save({"a": 1}, tmp_path / "run" / "checkpoints" / "best.ckpt")
    assert load_checkpoint(path) == {"a": 1}


def test_assert_plain_accepts_plain_nesting():
    assert_plain(
        {"a": [1, 2.5, True, None, "s", (torch.ones(1), {"b": torch.nn.Parameter(torch.ones(1))})],
         3: OrderedDict(w=torch.zeros(2))},
        "hparams",
    )


@pytest.mark.parametrize(
    ("bad", "where"),
    [
        ({"model": {"act": torch.nn.SiLU()}}, "hparams['model']['act']"),
        ({"path": Path("/x")}, "hparams['path']"),
        ({"xs": [1, {2, 3}]}, "hparams['xs'][1]"),
        ({(1, 2): 3}, "key (1, 2)"),
        ({"dtype": torch.float32}, "hparams['dtype']"),
    ],
)
def test_assert_plain_names_the_offending_element(bad, where):
    with pytest.raises(TypeError) as info:
        assert_plain(bad, "hparams")
    assert where in str(info.value)


def test_lightning_checkpoint_with_plain_hparams_passes_the_safe_loader(tmp_path):
    import pytorch_lightning as pl

    class Tiny(pl.LightningModule):
        def __init__(self, lr: float = 0.1, variant: str = "n", sizes: tuple = (1, 2)) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.lin = torch.nn.Linear(2, 1)

        def training_step(self, batch, batch_idx):
            return self.lin(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4, 2)), batch_size=2)
    ckpt_cb = pl.callbacks.ModelCheckpoint(dirpath=tmp_path, save_last=True)
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", logger=False, enable_progress_bar=False,
        enable_model_summary=False, callbacks=[ckpt_cb], default_root_dir=tmp_path,
    )
    trainer.fit(Tiny(), data)
    ckpt = load_checkpoint(tmp_path / "last.ckpt")
    assert ckpt["hyper_parameters"]["variant"] == "n"
    assert "optimizer_states" in ckpt and "state_dict" in ckpt
    assert_plain(ckpt["hyper_parameters"], "hyper_parameters")
