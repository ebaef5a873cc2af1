"""`homog posenc`: the positional-encoding lab (train, ablate, decompose)."""

from __future__ import annotations

import click

from homog.cli.options import params_option
from homog.config.posenc import ENCODINGS
from homog.config.posenc_presets import PRESETS
from homog.layout import Layout

pe_option = click.option(
    "--pe", required=True, type=click.Choice(ENCODINGS), help="Positional encoding."
)
preset_option = click.option(
    "--preset",
    type=click.Choice(list(PRESETS)),
    default=None,
    help="Override posenc.preset (cpu: minutes on 2 cores; reference: the paper's, GPU).",
)
device_option = click.option(
    "--device", default=None, help="cpu | cuda | cuda:N | auto [default: posenc.device or auto]."
)
out_option = click.option(
    "--out",
    "out_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Output directory [default: data/posenc/<pe>].",
)
force_option = click.option(
    "--force",
    is_flag=True,
    help="With --out: replace outputs there that homog did not write.",
)
# what train and ablate write into their --out folder (a user's own files there are refused)
TRAIN_OUTPUTS = ["checkpoints", "results.parquet", "metrics.json", "train_log.csv"]
ABLATE_OUTPUTS = ["head_ablation.parquet", "logit_decomposition.parquet", "ablation.json"]


def stage_options(command):
    """The options shared by ``train`` and ``ablate``: --pe, --params, --preset, --device, --out,
    --force."""
    for option in reversed(
        (pe_option, params_option, preset_option, device_option, out_option, force_option)
    ):
        command = option(command)
    return command


def _stage_out(out_dir: str | None, pe: str, names: list[str], force: bool, stage: str):
    """The output folder: data/posenc/<pe> (homog's own), or --out checked for files of the
    user's with the names the stage writes (homog.owned.check_stage_out)."""
    from homog.layout import Layout
    from homog.owned import check_stage_out

    if out_dir is None:
        return Layout().posenc_dir(pe)
    check_stage_out(out_dir, names, force=force, what=f"posenc {stage} outputs")
    return out_dir


def _posenc_params(params_path: str):
    from homog.config import load_config

    return load_config(params_path).posenc


@click.group()
def posenc() -> None:
    """Positional-encoding lab: small encoders on synthetic distance/count tasks.

    \b
    Examples:
      homog posenc train --pe rope       # trains, then ablates the heads
      homog posenc ablate --pe rope      # the ablation alone (checkpoints)
      homog posenc train --pe mla --preset reference --device cuda
      homog posenc decompose --model smollm2-135m
    """


@posenc.command()
@stage_options
@click.option(
    "--ablate/--no-ablate",
    default=True,
    show_default=True,
    help="Also write `homog posenc ablate`'s outputs, from each model right after it trains.",
)
def train(
    pe: str,
    params_path: str,
    preset: str | None,
    device: str | None,
    out_dir: str | None,
    force: bool,
    ablate: bool,
):
    """Train encoding PE on every task of posenc.tasks, for every seed; then ablate its heads.

    Writes data/posenc/<pe>/checkpoints/<task>-seed<seed>.pt, results.parquet (pe, task,
    split, accuracy, n_params, epochs, seed), metrics.json and train_log.csv (one row per
    epoch); and, unless --no-ablate, what `homog posenc ablate` writes (the same numbers),
    computed in the process that trained each model.

    \b
    Examples:
      homog posenc train --pe rope       # posenc.preset (cpu: minutes)
      homog posenc train --pe mla --preset reference --device cuda
      homog posenc train --pe alibi --out /tmp/alibi --no-ablate
    """
    from homog.owned import mark_stage_out
    from homog.posenc.train import run_train

    p = _posenc_params(params_path)
    names = TRAIN_OUTPUTS + ABLATE_OUTPUTS if ablate else TRAIN_OUTPUTS
    out = _stage_out(out_dir, pe, names, force, "train")
    frame, heads = run_train(p, pe, out, preset=preset, device=device or p.device, ablate=ablate)
    if out_dir is not None:
        mark_stage_out(out, "posenc train")
    for r in frame.itertuples():
        click.echo(f"{r.pe:13s} {r.task:9s} seed {r.seed} {r.split:5s} accuracy {r.accuracy:.4f}")
    if heads is not None:
        _echo_deposits(pe, heads)


def _echo_deposits(pe: str, heads) -> None:
    """One line per task: the largest single-head drop of ``heads`` (head_ablation)."""
    from homog.posenc.ablate import deposit_summary

    for task, d in deposit_summary(heads).items():
        click.echo(
            f"{pe}/{task}: largest drop {d['largest_drop']:.4f} from layer {d['layer']} head "
            f"{d['head']} (runner-up {d['runner_up_drop']:.4f})"
        )


@posenc.command()
@stage_options
def ablate(
    pe: str,
    params_path: str,
    preset: str | None,
    device: str | None,
    out_dir: str | None,
    force: bool,
):
    """Zero each head in turn and decompose the attention logits of PE's checkpoints.

    Writes data/posenc/<pe>/head_ablation.parquet (pe, task, layer, head, accuracy, drop),
    logit_decomposition.parquet (source posenc:<pe>:<task>, layer, head, term, share) and
    ablation.json. `homog posenc train` (the DVC stage) writes them already; this reruns
    them alone from the checkpoints, e.g. after changing posenc.decompose_samples.

    \b
    Examples:
      homog posenc ablate --pe rope      # after `train --pe rope --no-ablate`
      homog posenc ablate --pe mla --device cuda
    """
    from homog.owned import mark_stage_out
    from homog.posenc.ablate import run_ablate

    p = _posenc_params(params_path)
    out = _stage_out(out_dir, pe, ABLATE_OUTPUTS, force, "ablate")
    heads, _ = run_ablate(p, pe, out, preset=preset, device=device or p.device)
    if out_dir is not None:
        mark_stage_out(out, "posenc ablate")
    _echo_deposits(pe, heads)


@posenc.command()
@click.option(
    "--model",
    "model_key",
    required=True,
    help="A key of params.yaml `models:` (or a source such as random:tiny-llama).",
)
@params_option
@click.option(
    "--texts",
    "texts_path",
    default=str(Layout().texts),
    show_default=True,
    type=click.Path(dir_okay=False),
    help="Texts table (its 'original' variant); data/demo/reviews.jsonl if absent.",
)
@device_option
@click.option(
    "--out",
    "out_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="Output [default: data/posenc/pretrained/<model>/logit_decomposition.parquet].",
)
@click.option("--force", is_flag=True, help="Overwrite an --out file that homog did not write.")
def decompose(
    model_key: str,
    params_path: str,
    texts_path: str,
    device: str | None,
    out_path: str | None,
    force: bool,
):
    """Rotary logit decomposition of a pretrained RoPE LM, per layer and head.

    For each head: the share of the (row-centred) logit energy carried by the rotation,
    rot(q).rot(k) - q.k, against the unrotated q.k. Rows have source = the model key.

    \b
    Examples:
      homog posenc decompose --model smollm2-135m
      homog posenc decompose --model random:tiny-llama --out /tmp/decomp.parquet
    """
    from homog.config import load_config
    from homog.io import check_target
    from homog.layout import Layout
    from homog.owned import check_owned_file
    from homog.posenc.decompose import run_decompose

    params = load_config(params_path)
    if out_path is not None:  # data/posenc/pretrained/ is homog's own
        check_owned_file(check_target(out_path), force=force, what="decomposition")
    out = out_path or Layout().pretrained_decomposition(model_key)
    frame, counts = run_decompose(
        params, model_key, texts_path, out, device=device or params.posenc.device
    )
    rot = frame[frame["term"] == "rotation"].groupby("layer")["share"].mean()
    click.echo(
        f"{out}: {len(frame)} rows from {counts['n_texts']} texts, {counts['n_tokens']} tokens "
        f"({counts['n_truncated']} texts truncated); mean rotation share per layer:"
    )
    click.echo(" ".join(f"{layer}:{share:.3f}" for layer, share in rot.items()))
