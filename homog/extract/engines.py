"""The engine registry: engine name -> the function that runs the extract stage.

Every runner takes ``(model, source, texts, config, interventions, out_dir, *,
show_progress, log)`` like ``homog.extract.local.run_extract`` and returns the run records.
Runners are imported only when asked for, so the local engine never imports Ray (an optional
extra) and importing this module imports neither torch nor Ray.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from homog.config import ENGINES, Params, as_params
from homog.errors import HomogError
from homog.extract.plan import extract_inputs

Runner = Callable[..., list[dict[str, Any]]]


def _local(params: Params) -> Runner:
    from homog.extract.local import run_extract

    return run_extract


def _ray(params: Params) -> Runner:
    from homog.extract.ray_engine import run_extract_ray

    return functools.partial(run_extract_ray, ray_config=params.ray)


def _grouped(runner: Runner) -> Runner:
    """``runner`` called once per extraction pass of ``homog.extract.run.intervention_groups``
    (one pass unless ``extract.intervention_variants`` restricts the interventions)."""

    @functools.wraps(runner)
    def run(model, source, texts, config, interventions, out_dir, **kwargs):  # noqa: ANN001
        from homog.extract.run import finished_runs, intervention_groups

        df, interventions = extract_inputs(texts, interventions)
        log = kwargs.get("log", print)
        records: dict[str, dict[str, Any]] = {}
        for part, group, pair in intervention_groups(df, interventions, config):
            done = finished_runs(model, source, part, config, group, out_dir, pair)
            for iv, record in done.items():
                log(f"{model}/{iv}: already extracted (run {record['run_id']}), kept")
            records.update(done)
            todo = [iv for iv in group if iv not in done]
            if todo:
                ran = runner(model, source, part, config, todo, out_dir, pair_texts=pair, **kwargs)
                records.update(zip(todo, ran, strict=True))
        return [records[iv] for iv in interventions]

    return run


# engine name -> a function of the params giving the runner (names as homog.config.ENGINES)
RUNNERS: dict[str, Callable[[Params], Runner]] = {"local": _local, "ray": _ray}


def extract_runner(params: Params | Mapping[str, Any], engine: str | None = None) -> Runner:
    """The function that runs the extract stage for ``engine`` (default: ``extract.engine``).

    params: a ``Params`` or a raw params mapping (checked with ``as_params``). 'local' gives
    ``run_extract`` (nothing of Ray is imported), 'ray' gives ``run_extract_ray`` bound to
    the ``ray:`` params. Raises HomogError for an unknown engine or bad params.
    """
    params = as_params(params)
    name = engine or params.extract.engine
    if name not in RUNNERS:
        raise HomogError(f"unknown extract engine {name!r}: use one of {', '.join(ENGINES)}")
    return _grouped(RUNNERS[name](params))
