"""`homog probe`: linear sentiment probes per layer and the model's zero-shot answer."""

from __future__ import annotations

import click

from homog.cli.options import device_option, params_option, stage_out_option, texts_option
from homog.layout import Layout


@click.command()
@click.option("--model", "model_key", required=True, help="A key of params.yaml `models:`.")
@params_option
@texts_option("variant, sample_id, text, label")
@stage_out_option("data/probe/<model>")
@device_option
@click.option(
    "--step",
    type=click.Choice(["all", "features", "fit"]),
    default="all",
    show_default=True,
    help="features: the pooled vectors and zero-shot log-odds, into <out>/features (read from "
    "the extraction when it holds them: no forward pass); fit: the probes, summaries and "
    "slopes from those (no model; e.g. after a new stats.n_boot or probe.c, or after "
    "extraction); all: both, reusing features that are up to date.",
)
@click.option("--refit", is_flag=True, help="The same as --step fit.")
@click.option(
    "--force",
    is_flag=True,
    help="With --step all: rerun the forward passes even when the features are up to date.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def probe(
    model_key: str,
    params_path: str,
    texts_path: str,
    out_dir: str | None,
    device: str | None,
    step: str,
    refit: bool,
    force: bool,
    no_progress: bool,
) -> None:
    """Does homogenization cost the model anything? (docs/probe.md)

    Pools every text's hidden states per layer (the extraction's tokens and interventions),
    fits linear sentiment probes with folds grouped by review, scores the model's zero-shot
    answer, and relates both to erank within text (when data/extract/<model> is an
    extraction of these texts: with --texts OTHER there are no slopes, and stderr says why).
    The extraction's vectors and text-first answers are read when they are these texts'
    (no forward pass). Two steps: features (data/probe/<model>/features/: pooled_*.npy,
    index.parquet, zero_shot.parquet, features.json) and fit (data/probe/<model>/:
    probe_texts.parquet, lm_sentiment.parquet, probe_metrics.parquet, probe.json).

    \b
    Examples:
      homog probe --model smollm2-135m
      homog probe --model smollm2-135m --step fit  # new stats:, no forward pass
      homog probe --model gemma3-270m --texts my.parquet --out /tmp/probe
    """
    import dataclasses

    from homog.config import load_config
    from homog.io import probe_dir
    from homog.models import resolve_source
    from homog.probe.stage import run_probe

    params = load_config(params_path)
    source = resolve_source(model_key, params.model_sources())
    if device:
        params = dataclasses.replace(
            params, extract=dataclasses.replace(params.extract, device=device)
        )
    out = out_dir or str(Layout().probe_dir(model_key))
    probe_dir(out, what="probe output")
    record = run_probe(
        params,
        model_key,
        source,
        texts_path,
        out,
        step=step,
        refit=refit,
        force=force,
        show_progress=not no_progress,
    )
    if step == "features" and not refit:
        click.echo(
            f"{out}/features: {record['forward_passes']} forward passes, "
            f"{record['features_bytes_per_1000_texts']} bytes per 1,000 texts "
            f"(pooled vectors {record['pooled_bytes_per_1000_texts']})"
        )
        return
    _echo_headline(model_key, out, record)


def _echo_headline(model_key: str, out: str, record: dict) -> None:
    """The fit's summary on stdout: the best probe layer, the zero-shot accuracy and AUC on
    the originals, each slope's verdict, and the cost in time and bytes."""
    h = record["headline"]
    for b in h["best_layer"]:
        click.echo(
            f"{model_key}: best layer {b['layer']} on originals, probe accuracy {b['value']} "
            f"[{b['ci_low']}, {b['ci_high']}] (n={b['n']})"
        )
    for iv, a in h["lm_accuracy_original"].items():
        click.echo(
            f"{model_key}/{iv}: zero-shot accuracy on originals {a['value']} "
            f"[{a['ci_low']}, {a['ci_high']}]"
        )
    for iv, a in h.get("lm_auc_original", {}).items():
        click.echo(
            f"{model_key}/{iv}: zero-shot AUC on originals {a['value']} "
            f"[{a['ci_low']}, {a['ci_high']}]"
        )
    for s in h["slopes"]:
        click.echo(
            f"slope {s['metric']} {s['band']} vs {s['baseline']}: {s['value']} "
            f"[{s['ci_low']}, {s['ci_high']}] SESOI {s.get('sesoi', 'n/a')} p_holm {s['p_holm']} "
            f"-> {s['verdict']}"
        )
    click.echo(
        f"{out}: {record['s_per_100_texts']} s per 100 texts, features "
        f"{record['features_bytes_per_1000_texts']} bytes per 1,000 texts (pooled vectors "
        f"{record['pooled_bytes_per_1000_texts']})"
    )
