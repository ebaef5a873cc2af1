"""Training the positional-encoding lab's encoders (stage ``posenc_train@<pe>``).

Pure pieces (``make_splits``, ``build_model``, ``fit``, ``accuracy``) work on tensors; ``run_train``
does the I/O: one checkpoint per (task, seed) under ``<out>/checkpoints/``, ``results.parquet``
(posenc_results columns: pe, task, split, accuracy, n_params, epochs, seed) and
``train_log.csv`` (one row per epoch: pe, task, seed, epoch, lr, loss, train_accuracy,
test_accuracy, seconds; a DVC plot) and ``metrics.json`` (accuracy per task and split). With
``ablate`` (the stage's command), each run's heads are also ablated and its logits decomposed
right after it trains, in the same process (``homog.posenc.ablate``'s outputs): no second
process start, torch import and checkpoint load per encoding.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from homog.config.posenc import PosencConfig
from homog.io import HomogError, atomic_path, write_json
from homog.posenc.model import ENCODINGS, Encoder, EncoderConfig
from homog.posenc.presets import as_posenc, resolve
from homog.posenc.runs import (  # noqa: F401 - also this module's names for its callers
    accuracy,
    checkpoint_name,
    checkpoint_path,
    load_checkpoint,
    make_splits,
    pick_device,
    predictions,
    train_workers,
    use_threads,
)
from homog.posenc.tasks import TaskData
from homog.progress import progress


def build_model(pe: str, task: str, config: dict[str, Any], n_classes: int) -> Encoder:
    """An untrained Encoder for ``pe`` sized for ``task`` (vocab, classes, padded length)."""
    if pe not in ENCODINGS:
        raise HomogError(f"unknown positional encoding {pe!r}; choose from {', '.join(ENCODINGS)}")
    spec = config[task]
    try:
        cfg = EncoderConfig(
            vocab_size=int(spec["vocab_size"]),
            n_classes=n_classes,
            block_size=int(spec["seq_len"]),
            pe=pe,
            **config["model"],
        )
    except (AssertionError, TypeError) as exc:
        raise HomogError(f"posenc model config is invalid: {exc}") from exc
    return Encoder(cfg)


def cosine_with_warmup(step: int, total: int, warmup: float) -> float:
    """LR multiplier: linear warm-up over the first ``warmup`` fraction, then cosine to 0."""
    n_warm = max(1, int(round(warmup * total)))
    if step < n_warm:
        return (step + 1) / n_warm
    return 0.5 * (1.0 + math.cos(math.pi * (step - n_warm) / max(1, total - n_warm)))


def fit(
    model: Encoder,
    train: TaskData,
    test: TaskData,
    config: dict[str, Any],
    *,
    seed: int,
    device: torch.device,
    on_step: Callable[[float], None] | None = None,
) -> list[dict[str, float]]:
    """Train ``model`` in place with AdamW and a warm-up + cosine schedule.

    ``config`` is the preset's ``train`` section. Returns one log row per epoch (epoch, lr,
    loss, train_accuracy, test_accuracy, seconds); loss and train_accuracy are running
    values over the epoch's batches (free: no second pass over the training set).
    ``on_step(loss)`` is called after every optimizer step (the progress bar).
    """
    torch.manual_seed(seed)
    model.to(device)
    batch_size, epochs = int(config["batch_size"]), int(config["epochs"])
    steps_per_epoch = math.ceil(len(train.labels) / batch_size)
    total = steps_per_epoch * epochs
    # no weight decay on norms, biases and embeddings' position/bias tables (1-D tensors)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": float(config["weight_decay"])},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=float(config["lr"]),
    )
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: cosine_with_warmup(s, total, float(config["warmup"]))
    )
    shuffle = torch.Generator().manual_seed(seed)
    # bfloat16 matmuls on a GPU when train.amp is set (the reference preset); fp32 elsewhere
    use_amp = bool(config.get("amp")) and device.type == "cuda"
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp)
    eval_bs = int(config["eval_batch_size"])
    log = []
    for epoch in range(1, epochs + 1):
        model.train()
        start, total_loss, correct = time.perf_counter(), 0.0, 0
        for idx in torch.randperm(len(train.labels), generator=shuffle).split(batch_size):
            x, y = train.tokens[idx].to(device), train.labels[idx].to(device)
            with autocast:
                logits = model(x)
                loss = F.cross_entropy(logits.float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total_loss += loss.item() * len(idx)
            correct += (logits.argmax(-1) == y).sum().item()
            if on_step is not None:
                on_step(loss.item())
        seconds = time.perf_counter() - start
        log.append(
            {
                "epoch": epoch,
                "lr": sched.get_last_lr()[0],
                "loss": total_loss / len(train.labels),
                "train_accuracy": correct / len(train.labels),
                "test_accuracy": accuracy(model, test, eval_bs, device),
                "seconds": seconds,
            }
        )
    return log


def train_run(
    pe: str,
    task: str,
    seed: int,
    config: dict[str, Any],
    data: tuple[TaskData, TaskData],
    device: torch.device,
    on_step: Callable[[float], None] | None = None,
    *,
    ablate_samples: int | None = None,
    on_head: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], tuple | None]:
    """One (task, seed) run of ``pe``: (its train_log rows, its results rows (train and
    test accuracy), its checkpoint payload with the weights on the CPU, its ablation).

    The ablation is None, or with ``ablate_samples`` set (posenc.decompose_samples) the rows
    of ``homog.posenc.ablate.ablate_run`` on the trained model: the rows ``homog posenc
    ablate`` computes from the checkpoint. ``on_head()``: after every ablated head.
    """
    train, test = data
    torch.manual_seed(seed)
    model = build_model(pe, task, config, train.n_classes)
    log = fit(model, train, test, config["train"], seed=seed, device=device, on_step=on_step)
    meta = {"pe": pe, "task": task, "seed": seed}
    eval_bs = int(config["train"]["eval_batch_size"])
    results = [
        {
            "pe": pe,
            "task": task,
            "split": split,
            "accuracy": accuracy(model, part, eval_bs, device),
            "n_params": model.n_params(),
            "epochs": len(log),
            "seed": seed,
        }
        for split, part in (("train", train), ("test", test))
    ]
    payload = {
        "model_config": asdict(model.config),
        "state_dict": {k: v.cpu() for k, v in model.state_dict().items()},
        "config": config,
        "meta": meta,
    }
    ablation = None
    if ablate_samples is not None:
        from homog.posenc.ablate import ablate_run  # (and the decomposition: only to ablate)

        ablation = ablate_run(
            pe, task, seed, model, test, config, ablate_samples, device, on_head=on_head
        )
    return [{**meta, **row} for row in log], results, payload, ablation


_STEPS: Any = None  # in a worker process: the queue its steps and ablated heads go to


def _worker_start(steps: Any, train: dict[str, Any]) -> None:
    global _STEPS
    _STEPS = steps
    use_threads(train, torch.device("cpu"))


def _train_in_worker(
    pe: str,
    task: str,
    seed: int,
    config: dict[str, Any],
    data: tuple[TaskData, TaskData],
    key: int,
    ablate_samples: int | None,
    ablate_key: int,
):
    """``train_run`` on the CPU in a worker process; its optimizer steps and ablated heads go
    to the parent's progress bars (``key``, ``ablate_key``)."""
    return train_run(
        pe,
        task,
        seed,
        config,
        data,
        torch.device("cpu"),
        on_step=lambda loss: _STEPS.put(key),
        ablate_samples=ablate_samples,
        on_head=lambda: _STEPS.put(ablate_key),
    )


def _train_side_by_side(
    pe: str,
    runs: list[tuple[str, int]],
    config: dict[str, Any],
    splits: dict[str, tuple[TaskData, TaskData]],
    workers: int,
    bar: Any,
    jobs: list,
    ablate_samples: int | None = None,
) -> list[tuple]:
    """``train_run`` for every (task, seed) of ``runs`` in ``workers`` spawned processes (a
    fork would copy this process's threads' locks), in the order of ``runs``. ``jobs``: the
    progress bars of the runs' steps, then (with ``ablate_samples``) of their ablations."""
    import multiprocessing as mp
    import queue as queues
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = mp.get_context("spawn")
    steps = ctx.Queue()

    def drain(timeout: float) -> None:
        try:
            key = steps.get(timeout=timeout)
            while True:
                bar.update(jobs[key], advance=1)
                key = steps.get_nowait()
        except queues.Empty:
            return

    try:
        with ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_worker_start, initargs=(steps, config["train"])
        ) as pool:
            futures = [
                pool.submit(
                    _train_in_worker,
                    pe,
                    task,
                    seed,
                    config,
                    splits[task],
                    key,
                    ablate_samples,
                    len(runs) + key,
                )
                for key, (task, seed) in enumerate(runs)
            ]
            pending = set(futures)
            while pending:
                drain(0.1)
                pending = wait(pending, timeout=0, return_when=FIRST_COMPLETED).not_done
            out = [f.result() for f in futures]
        drain(0.1)
    except BrokenProcessPool as exc:
        raise HomogError(
            f"a posenc training worker process died ({exc}); out of memory? Set "
            "posenc.train.workers: 1 in params.yaml to train in this process"
        ) from exc
    finally:
        steps.close()
    return out


def run_train(
    posenc: PosencConfig | Mapping[str, Any],
    pe: str,
    out_dir: str | Path,
    *,
    preset: str | None = None,
    device: str = "auto",
    ablate: bool = False,
):
    """Train ``pe`` on every task in ``posenc.tasks`` for every seed; write the outputs.

    ``posenc`` is params.yaml's ``posenc:`` section (typed, or a mapping). The runs train in
    ``train_workers`` processes side by side (one after another on a GPU). Writes
    ``out_dir/checkpoints/``, ``results.parquet``, ``metrics.json`` and ``train_log.csv``
    atomically. With ``ablate``, each run's process then ablates the run's heads and
    decomposes its logits (``posenc.decompose_samples``), and ``homog.posenc.ablate.
    write_ablation`` writes what ``run_ablate`` would (the same numbers). Returns (the results
    DataFrame, the head_ablation DataFrame or None without ``ablate``).
    """
    posenc = as_posenc(posenc)
    config = resolve(posenc, preset)
    dev = pick_device(device)
    use_threads(config["train"], dev)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    runs = [(task, int(seed)) for task in posenc.tasks for seed in config["train"]["seeds"]]
    workers = train_workers(config["train"], dev, len(runs))
    ablate_samples = posenc.decompose_samples if ablate else None
    out_dir = Path(out_dir)
    with atomic_path(out_dir / "checkpoints", directory=True) as ckpt_dir, progress() as bar:
        splits = {task: make_splits(task, config) for task in posenc.tasks}
        batch, epochs = int(config["train"]["batch_size"]), int(config["train"]["epochs"])
        jobs = [
            bar.add_task(
                f"posenc {pe}/{task} seed {seed}",
                total=math.ceil(len(splits[task][0].labels) / batch) * epochs,
            )
            for task, seed in runs
        ]
        if ablate:
            n_heads = int(config["model"]["n_layer"]) * int(config["model"]["n_head"])
            jobs += [
                bar.add_task(f"ablate {pe}/{task} seed {seed}", total=n_heads)
                for task, seed in runs
            ]
        if workers > 1:
            for task in posenc.tasks:  # a bad config fails here, before any process starts
                build_model(pe, task, config, splits[task][0].n_classes)
            done = _train_side_by_side(pe, runs, config, splits, workers, bar, jobs, ablate_samples)
        else:

            def advance(key: int) -> Callable[..., None]:
                """Advances bar ``jobs[key]`` by one (a step's or a head's callback)."""
                return lambda *_: bar.update(jobs[key], advance=1)

            done = [
                train_run(
                    pe,
                    task,
                    seed,
                    config,
                    splits[task],
                    dev,
                    on_step=advance(key),
                    ablate_samples=ablate_samples,
                    on_head=advance(len(runs) + key) if ablate else None,
                )
                for key, (task, seed) in enumerate(runs)
            ]
        for (task, seed), (_, _, payload, _) in zip(runs, done, strict=True):
            torch.save(payload, ckpt_dir / checkpoint_name(task, seed))
    return _write_outputs(out_dir, done, ablate)


def _write_outputs(out_dir: Path, done: list[tuple], ablate: bool):
    """results.parquet, metrics.json, train_log.csv (and the ablation's files) of the runs
    ``done`` (``train_run``'s tuples); (the results frame, the head_ablation frame or None)."""
    import pandas as pd

    results = [row for _, rows, _, _ in done for row in rows]
    log_rows = [row for rows, _, _, _ in done for row in rows]
    frame = pd.DataFrame(results)
    with atomic_path(out_dir / "results.parquet") as tmp:
        frame.to_parquet(tmp, index=False)
    # the DVC metrics file: accuracy per task and split, mean over seeds
    metrics: dict[str, dict[str, float]] = {}
    for (task, split), acc in frame.groupby(["task", "split"])["accuracy"].mean().items():
        metrics.setdefault(task, {})[f"{split}_accuracy"] = round(float(acc), 4)
    write_json(out_dir / "metrics.json", metrics)
    with atomic_path(out_dir / "train_log.csv") as tmp:
        pd.DataFrame(log_rows).to_csv(tmp, index=False)
    heads = None
    if ablate:
        from homog.posenc.ablate import write_ablation

        ablation = [row for _, _, _, (rows, _) in done for row in rows]
        decomposition = [row for _, _, _, (_, rows) in done for row in rows]
        heads, _ = write_ablation(out_dir, ablation, decomposition)
    return frame, heads
