"""`homog extract`: per-layer hidden-state and attention summaries of one model."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from homog.cli.options import device_option, params_option, stage_out_option, texts_option
from homog.errors import HomogError
from homog.extract import ENGINES
from homog.interventions import check_names, forms
from homog.io import probe_dir
from homog.layout import Layout


def _config(extract: Any, overrides: dict[str, Any], interventions: tuple[str, ...]) -> Any:
    """params' ``extract`` section with the options given (None: not given); named
    ``interventions`` replace the params' runs, the dose grids' included."""
    if interventions:
        overrides = {**overrides, "interventions": interventions}
        overrides |= {"sink_bias_doses": (), "homogenize_doses": ()}
    return dataclasses.replace(extract, **{k: v for k, v in overrides.items() if v is not None})


@click.command()
@click.option(
    "--model",
    "model_key",
    required=True,
    help="A key of params.yaml `models:` (a source such as random:tiny-llama, hf:<id-or-dir> "
    "needs --out: stats, load and the report read only the keys).",
)
@params_option
@click.option(
    "--intervention",
    "interventions",
    multiple=True,
    callback=lambda _ctx, _param, names: check_names(names, "--intervention"),
    help="Repeatable; default: extract.interventions and the runs of the extract.*_doses "
    f"grids (names given here replace them all). One of {', '.join(forms())} "
    "(e.g. sink_bias:-2, homogenize:0.2; docs/interventions.md).",
)
@texts_option("variant, sample_id, text")
@stage_out_option("data/extract/<model>")
@device_option
@click.option("--dtype", default=None, help="Override extract.dtype.")
@click.option("--max-tokens", type=int, default=None, help="Override extract.max_tokens.")
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=None,
    help="Override extract.engine: local (this process) | ray (a Ray cluster: ray.address / "
    "RAY_ADDRESS, or a local one; needs pip install 'homog[ray]').",
)
@click.option("--no-progress", is_flag=True, help="No progress bar (logs only).")
@click.option(
    "--force",
    is_flag=True,
    help="With --out: replace <out>/<intervention> folders that homog did not write.",
)
def extract(
    model_key: str,
    params_path: str,
    interventions: tuple[str, ...],
    texts_path: str,
    out_dir: str | None,
    device: str | None,
    dtype: str | None,
    max_tokens: int | None,
    engine: str | None,
    no_progress: bool,
    force: bool,
) -> None:
    """Run a causal LM over every text and keep small per-layer summaries.

    Writes data/extract/<model>/<intervention>/: layer_metrics, attention_profile,
    attention_heads, dataset_spectra, massive_activations and, with
    extract.sentence_metrics, sentence_metrics (Parquet files); vectors.npz (sampled token
    vectors, MAUVE's input), pooled_mean.npy and zero_shot.parquet (each text's mean
    vector per layer and answer to a text-first probe.prompt: the probe's input) and
    run.json (written last). An interrupted run resumes from its finished shards; with
    --out, an <out>/<intervention> folder that homog did not write needs --force.

    \b
    Examples:
      homog extract --model smollm2-135m
      homog extract --model gemma3-270m --intervention shuffle_pos
      homog extract --model smollm2-135m --intervention sink_bias:-2
      homog extract --model random:tiny-llama --texts my.parquet --out /tmp/x
      homog extract --model llama3-8b --engine ray  # a models: key; 1 actor/GPU
    """
    from homog.config import load_config
    from homog.extract import extract_runner
    from homog.models import resolve_source
    from homog.owned import check_stage_out, mark_stage_out
    from homog.progress import console

    params = load_config(params_path)
    source = resolve_source(model_key, params.model_sources())
    if out_dir is None and model_key not in params.models:
        raise HomogError(_not_a_key(model_key, params.model_sources(), params_path))
    overrides = {"device": device, "dtype": dtype, "max_tokens": max_tokens, "engine": engine}
    config = _config(params.extract, overrides, interventions)
    out = out_dir or str(Layout().extract_dir(model_key))
    if out_dir is not None:  # data/extract/ is homog's own
        check_stage_out(out, list(config.interventions), force=force, what="extract runs")
    probe_dir(out, what="extract output")  # before the model loads
    run = extract_runner(params, config.engine)  # imports Ray only for the ray engine
    try:
        records = run(
            model_key,
            source,
            texts_path,
            config,
            config.interventions,
            out,
            show_progress=not no_progress,
            log=lambda m: console.print(f"[yellow]{m}"),
        )
    except KeyboardInterrupt:
        console.print("[red]interrupted: finished shards are kept; run the same command to resume")
        raise SystemExit(130) from None
    if out_dir is not None:
        mark_stage_out(out, "extract")
    for r in records:
        t = r["timings"]
        click.echo(
            f"{out}/{r['intervention']}: run {r['run_id']}, {r['n_texts']} texts, "
            f"{r['n_tokens']} tokens, {r['n_truncated']} truncated, "
            f"{r['output_bytes'] / 1e6:.1f} MB, load {t['load_s']} s, "
            f"extract {t['extract_s']} s"
        )


def _not_a_key(source: str, sources: dict[str, str], params_path: str) -> str:
    """How to make ``source`` (given as --model, not a key of ``models:``) reach the database.

    Its outputs in data/extract/ would be read by neither stats nor load: both read only the
    keys of ``models:``. So the command stops and says how to add the key (or to use --out).
    """
    same = [key for key, src in sources.items() if src == source]
    if same:
        return (
            f"{source} is the source of the models: key {same[0]!r} of {params_path}: "
            f"use --model {same[0]} (stats, load and the report read only the keys)"
        )
    name = source.split(":", 1)[1].rstrip("/").rsplit("/", 1)[-1]
    key = name.replace("@", "-").lower() or "my-model"
    return (
        f"{source} is not a key of {params_path} `models:`, and stats, load and the report "
        f"read only those keys: its results would never reach the database. Add it\n"
        f"  models:\n    {key}: {{source: {source}}}\n"
        f"then run `dvc repro` (dvc.yaml makes one extract@{key} stage per key) or "
        f"`homog extract --model {key}`; to extract outside the pipeline, give --out DIR"
    )
