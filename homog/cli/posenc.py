"""`homog posenc`: the positional-encoding lab (train, ablate, decompose)."""

from __future__ import annotations

import click

from homog.cli.options import params_option
from homog.layout import Layout
from homog.posenc import ENCODINGS
from homog.posenc.presets import PRESETS

pe_option = click.option(
    "--pe", required=True, type=click.Choice(ENCODINGS), help="Positional encoding."
)
preset_option = click.option(
    "--preset", type=click.Choice(list(PRESETS)), default=None,
    help="Override posenc.preset (cpu: minutes on 2 cores; reference: the paper's, GPU).",
)  # fmt: skip
device_option = click.option(
    "--device", default=None, help="cpu | cuda | cuda:N | auto [default: posenc.device or auto]."
)
out_option = click.option(
    "--out", "out_dir", default=None, type=click.Path(file_okay=False),
    help="Output directory [default: data/posenc/<pe>].",
)  # fmt: skip


def stage_options(command):
    """The options shared by ``train`` and ``ablate``: --pe, --params, --preset, --device, --out."""
    for option in reversed((pe_option, params_option, preset_option, device_option, out_option)):
        command = option(command)
    return command


def _posenc_params(params_path: str):
    from homog.config import load_config

    return load_config(params_path).posenc


@click.group()
def posenc() -> None:
    """Positional-encoding lab: small encoders on synthetic distance/count tasks.

    \b
    Examples:
      homog posenc train --pe rope
      homog posenc ablate --pe rope
      homog posenc train --pe mla --preset reference --device cuda
      homog posenc decompose --model smollm2-135m
    """


@posenc.command()
@stage_options
def train(pe: str, params_path: str, preset: str | None, device: str | None, out_dir: str | None):
    """Train encoding PE on every task of posenc.tasks, for every seed.

    Writes data/posenc/<pe>/checkpoints/<task>-seed<seed>.pt, results.parquet (pe, task,
    split, accuracy, n_params, epochs, seed) and train_log.csv (one row per epoch).

    \b
    Examples:
      homog posenc train --pe rope                     # posenc.preset (cpu: minutes)
      homog posenc train --pe mla --preset reference --device cuda
      homog posenc train --pe alibi --out /tmp/alibi
    """
    from homog.layout import Layout
    from homog.posenc.train import run_train

    p = _posenc_params(params_path)
    frame = run_train(
        p, pe, out_dir or Layout().posenc_dir(pe), preset=preset, device=device or p.device
    )
    for r in frame.itertuples():
        click.echo(f"{r.pe:13s} {r.task:9s} seed {r.seed} {r.split:5s} accuracy {r.accuracy:.4f}")


@posenc.command()
@stage_options
def ablate(pe: str, params_path: str, preset: str | None, device: str | None, out_dir: str | None):
    """Zero each head in turn and decompose the attention logits of PE's checkpoints.

    Writes data/posenc/<pe>/head_ablation.parquet (pe, task, layer, head, accuracy, drop) and
    logit_decomposition.parquet (source posenc:<pe>:<task>, layer, head, term, share).

    \b
    Examples:
      homog posenc ablate --pe rope                    # after `homog posenc train --pe rope`
      homog posenc ablate --pe mla --device cuda
    """
    from homog.layout import Layout
    from homog.posenc.ablate import deposit_summary, run_ablate

    p = _posenc_params(params_path)
    heads, _ = run_ablate(
        p, pe, out_dir or Layout().posenc_dir(pe), preset=preset, device=device or p.device
    )
    for task, d in deposit_summary(heads).items():
        click.echo(
            f"{pe}/{task}: largest drop {d['largest_drop']:.4f} from layer {d['layer']} head "
            f"{d['head']} (runner-up {d['runner_up_drop']:.4f})"
        )


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
def decompose(
    model_key: str, params_path: str, texts_path: str, device: str | None, out_path: str | None
):
    """Rotary logit decomposition of a pretrained RoPE LM, per layer and head.

    For each head: the share of the (row-centred) logit energy carried by the rotation,
    rot(q).rot(k) - q.k, against the unrotated q.k. Rows have source = the model key.

    \b
    Examples:
      homog posenc decompose --model smollm2-135m
      homog posenc decompose --model random:tiny-llama --device cpu --out /tmp/decomp.parquet
    """
    from homog.config import load_config
    from homog.layout import Layout
    from homog.posenc.decompose import run_decompose

    params = load_config(params_path)
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
