"""What a training run of the lab and its ablation share (homog.posenc.train and
homog.posenc.ablate both import it; neither imports the other at load time): the device and
threads, the task's splits, accuracy, and the checkpoints' names and loading."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from homog.io import HomogError
from homog.posenc.model import Encoder, EncoderConfig
from homog.posenc.tasks import TaskData, make_task


def pick_device(device: str) -> torch.device:
    """'cpu', 'cuda', 'cuda:N' or 'auto' (cuda when available) -> torch.device."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise HomogError(f"--device {device} asked for, but torch sees no CUDA device")
    return torch.device(device)


def use_threads(train: dict[str, Any], device: torch.device) -> None:
    """Apply ``train.threads`` (0 = leave torch's default) when running on the CPU."""
    threads = int(train.get("threads") or 0)
    if device.type == "cpu" and threads > 0:
        torch.set_num_threads(threads)


def make_splits(task: str, config: dict[str, Any]) -> tuple[TaskData, TaskData]:
    """The task's (train, test) data, generated and split with ``train.data_seed``."""
    train = config["train"]
    data = make_task(task, config[task], seed=int(train["data_seed"]))
    return data.split(float(train["train_fraction"]), seed=int(train["data_seed"]))


@torch.no_grad()
def predictions(model: Encoder, data: TaskData, batch_size: int, device: torch.device):
    """Predicted classes [N] (on CPU), the model in eval mode."""
    model.eval()
    out = [
        model(data.tokens[i : i + batch_size].to(device)).argmax(-1).cpu()
        for i in range(0, len(data.labels), batch_size)
    ]
    return torch.cat(out)


def accuracy(model: Encoder, data: TaskData, batch_size: int, device: torch.device) -> float:
    """Fraction of ``data`` classified correctly."""
    return (predictions(model, data, batch_size, device) == data.labels).float().mean().item()


def checkpoint_name(task: str, seed: int) -> str:
    return f"{task}-seed{seed}.pt"


def checkpoint_path(out_dir: Path, task: str, seed: int) -> Path:
    """Where ``run_train`` leaves the checkpoint of (task, seed)."""
    return out_dir / "checkpoints" / checkpoint_name(task, seed)


def load_checkpoint(path: Path, device: torch.device) -> tuple[Encoder, dict[str, Any]]:
    """The trained Encoder (eval mode, on ``device``) and the run config stored beside it.

    Raises HomogError when the checkpoint is missing (run ``homog posenc train`` first).
    """
    if not path.exists():
        raise HomogError(f"checkpoint {path} not found: run `homog posenc train` for it first")
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    model = Encoder(EncoderConfig(**ckpt["model_config"]))
    model.load_state_dict(ckpt["state_dict"])
    return model.to(device).eval(), ckpt["config"]


def train_workers(train: dict[str, Any], device: torch.device, runs: int) -> int:
    """How many processes train ``runs`` (task, seed) runs side by side.

    ``train.workers``: 1 = one after another in this process; 0 = auto: on a CPU device, the
    cores this process may use divided by ``train.threads``, at most ``runs``. A GPU device
    always trains in this process. The runs are independent (their own seeds and data), so
    the outputs are the same either way (``tests/test_posenc_cli.py`` checks it).
    """
    workers = int(train.get("workers") or 0)
    if device.type != "cpu" or runs < 2 or workers == 1:
        return 1
    if workers <= 0:
        threads = int(train.get("threads") or 0) or torch.get_num_threads()
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        workers = max(1, (cores or 1) // threads)
    return max(1, min(workers, runs))
