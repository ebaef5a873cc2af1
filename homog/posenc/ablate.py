"""Per-head ablation and logit decomposition of trained encoders (``homog posenc ablate``,
and stage ``posenc_train@<pe>`` right after training).

A head is ablated by zeroing its output before the output projection (``head_mask``), for
every layer and head in turn; for MLA that output already includes the head's RoPE path. The
test accuracy with the head removed and the drop from the intact model are recorded.

Outputs in ``data/posenc/<pe>/``: ``head_ablation.parquet`` (pe, task, layer, head, accuracy,
drop; layer 1..L, head 0..H-1, averaged over seeds), ``logit_decomposition.parquet``
(source = ``posenc:<pe>:<task>``, layer, head, term, share) and ``ablation.json`` (the DVC
metrics: per task the largest single-head drop, its layer and head, and the runner-up drop).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from homog.config.posenc import PosencConfig
from homog.io import atomic_path, write_json
from homog.posenc.decompose import encoder_decomposition
from homog.posenc.model import Encoder
from homog.posenc.presets import as_posenc, resolve
from homog.posenc.runs import (
    accuracy,
    checkpoint_path,
    load_checkpoint,
    make_splits,
    pick_device,
    use_threads,
)
from homog.posenc.tasks import TaskData
from homog.progress import progress


@contextlib.contextmanager
def ablated(model: Encoder, layer: int, head: int) -> Iterator[Encoder]:
    """Zero head ``head`` of layer ``layer`` (1-based) inside the block; restore it after."""
    mask = model.head_masks()[layer - 1]
    kept = mask[head].item()
    mask[head] = 0.0
    try:
        yield model
    finally:
        mask[head] = kept


def head_ablation(
    model: Encoder, data: TaskData, batch_size: int, device: torch.device, on_head=None
) -> list[dict[str, Any]]:
    """Rows (layer, head, accuracy, drop) for every head of ``model`` on ``data``.

    drop = intact accuracy - accuracy with that one head zeroed (positive = the head helped).
    """
    base = accuracy(model, data, batch_size, device)
    rows = []
    for layer, mask in enumerate(model.head_masks(), start=1):
        for head in range(mask.numel()):
            with ablated(model, layer, head):
                acc = accuracy(model, data, batch_size, device)
            rows.append({"layer": layer, "head": head, "accuracy": acc, "drop": base - acc})
            if on_head is not None:
                on_head()
    return rows


def ablate_run(
    pe: str,
    task: str,
    seed: int,
    model: Encoder,
    test: TaskData,
    config: dict[str, Any],
    n_decompose: int,
    device: torch.device,
    on_head: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One trained (task, seed) model of ``pe`` on its test split: the head_ablation rows (pe,
    task, seed, layer, head, accuracy, drop) and the logit decomposition rows of its first
    ``n_decompose`` test sequences (source, seed, layer, head, term, share).

    ``config`` is the run's resolved preset (its ``train.eval_batch_size`` is used);
    ``on_head()`` is called after every head (the progress bar). ``run_ablate`` calls it on
    each checkpoint, ``homog.posenc.train.train_run`` on the model it has just trained (the
    same weights, so the same rows).
    """
    model.eval()
    batch_size = int(config["train"]["eval_batch_size"])
    with full_fp32_matmuls(device):
        rows = head_ablation(model, test, batch_size, device, on_head=on_head)
        idx = test.tokens[:n_decompose].to(device)
        terms = encoder_decomposition(model, idx)
    ablation = [{"pe": pe, "task": task, "seed": seed, **r} for r in rows]
    decomposition = [{"source": f"posenc:{pe}:{task}", "seed": seed, **r} for r in terms]
    return ablation, decomposition


@contextlib.contextmanager
def full_fp32_matmuls(device: torch.device) -> Iterator[None]:
    """CUDA matmuls without TF32 inside (torch's default; ``run_train`` allows TF32 for the
    training), so the ablation's numbers do not depend on what ran before it in the process."""
    if device.type != "cuda":
        yield
        return
    kept = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = kept


def write_ablation(
    out_dir: str | Path,
    ablation: list[dict[str, Any]],
    decomposition: list[dict[str, Any]],
):
    """Average the rows of every (task, seed) run over seeds (``ablate_run``'s, in the order
    of the runs) and write ``head_ablation.parquet``, ``logit_decomposition.parquet`` and
    ``ablation.json`` into ``out_dir``. Returns (head_ablation, logit_decomposition)."""
    import pandas as pd

    out_dir = Path(out_dir)
    # one row per head: the mean over seeds (the tables have no seed column)
    heads = (
        pd.DataFrame(ablation)
        .groupby(["pe", "task", "layer", "head"], as_index=False, sort=False)[["accuracy", "drop"]]
        .mean()
    )
    terms = (
        pd.DataFrame(decomposition)
        .groupby(["source", "layer", "head", "term"], as_index=False, sort=False)["share"]
        .mean()
    )
    with atomic_path(out_dir / "head_ablation.parquet") as tmp:
        heads.to_parquet(tmp, index=False)
    with atomic_path(out_dir / "logit_decomposition.parquet") as tmp:
        terms.to_parquet(tmp, index=False)
    write_json(out_dir / "ablation.json", deposit_summary(heads))
    return heads, terms


def run_ablate(
    posenc: PosencConfig | Mapping[str, Any],
    pe: str,
    out_dir: str | Path,
    *,
    preset: str | None = None,
    device: str = "auto",
):
    """Ablate every head and decompose the logits of ``pe``'s checkpoints; write the outputs.

    Reads ``out_dir/checkpoints/<task>-seed<seed>.pt`` (from ``run_train``) and regenerates the
    test split from the config stored in each checkpoint, so the rows describe exactly the data
    the model was tested on. ``run_train`` writes the same outputs right after training (the
    DVC stage); this reruns them alone, e.g. with another ``posenc.decompose_samples``.
    Returns (head_ablation, logit_decomposition) DataFrames. Raises HomogError when a
    checkpoint is missing.
    """
    posenc = as_posenc(posenc)
    config = resolve(posenc, preset)
    dev = pick_device(device)
    use_threads(config["train"], dev)
    out_dir = Path(out_dir)
    ablation, decomposition = [], []
    with progress() as bar:
        for task in posenc.tasks:
            for seed in config["train"]["seeds"]:
                model, run_config = load_checkpoint(checkpoint_path(out_dir, task, seed), dev)
                _, test = make_splits(task, run_config)
                n_heads = sum(m.numel() for m in model.head_masks())
                job = bar.add_task(f"ablate {pe}/{task} seed {seed}", total=n_heads)
                rows, terms = ablate_run(
                    pe,
                    task,
                    seed,
                    model,
                    test,
                    run_config,
                    posenc.decompose_samples,
                    dev,
                    on_head=lambda job=job: bar.update(job, advance=1),
                )
                ablation += rows
                decomposition += terms
    return write_ablation(out_dir, ablation, decomposition)


def deposit_summary(heads) -> dict[str, dict[str, float]]:
    """Per task: the largest single-head drop, where it is, and the runner-up's drop.

    A "single-head deposit" shows as one large drop with a small runner-up. heads: the
    head_ablation DataFrame of one encoding.
    """
    out = {}
    for task, rows in heads.groupby("task", sort=False):
        ranked = rows.sort_values("drop", ascending=False)
        top = ranked.iloc[0]
        out[str(task)] = {
            "largest_drop": round(float(top["drop"]), 4),
            "layer": int(top["layer"]),
            "head": int(top["head"]),
            "runner_up_drop": round(float(ranked["drop"].iloc[1]), 4) if len(ranked) > 1 else 0.0,
        }
    return out
