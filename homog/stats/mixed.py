"""The secondary analysis of the stats stage: a linear mixed model per (run, metric, band).

    value ~ C(variant, Treatment("original")) + log(n_tokens) + (1 | sample_id)

fitted by REML with statsmodels' MixedLM over every variant of the run at once. A contrast
a - b is then L beta (beta_original = 0) with variance L Cov(beta) L^T, a Wald z-test and a
normal CI. Where the fit fails or does not converge the contrast is NaN (never a number from a
failed fit). Without token counts (an older extract) the model is fitted without the length
term.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

MIXED_COLUMNS = ("mm_diff", "mm_ci_low", "mm_ci_high", "mm_p_value")


def fit_mixed(long: pd.DataFrame, reference: str = "original"):
    """Fit the model on ``long`` rows (variant, sample_id, value, n_tokens or NaN).

    Returns (params, cov, names, reference) with names the variants' coefficient names keyed
    by variant (the reference has none), or None when it cannot be fitted or did not converge.
    """
    import statsmodels.formula.api as smf

    data = long[np.isfinite(long["value"])].copy()
    if data["variant"].nunique() < 2 or data["sample_id"].nunique() < 3:
        return None
    variants = sorted(set(data["variant"]))
    ref = reference if reference in variants else variants[0]
    formula = f"value ~ C(variant, Treatment({ref!r}))"
    if "n_tokens" in data and np.isfinite(data["n_tokens"]).all() and (data["n_tokens"] > 0).all():
        data["log_n"] = np.log(data["n_tokens"].astype(float))
        if data["log_n"].std() > 0:
            formula += " + log_n"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = smf.mixedlm(formula, data, groups=data["sample_id"]).fit(reml=True)
    except (ValueError, np.linalg.LinAlgError):
        return None
    if not getattr(fit, "converged", True):
        return None
    names = {v: f"C(variant, Treatment({ref!r}))[T.{v}]" for v in variants if v != ref}
    fe = fit.fe_params
    cov = fit.cov_params().loc[fe.index, fe.index]
    return fe, cov, names, ref


def pair_effects(fitted, pairs: Sequence[tuple[str, str]], ci: float) -> dict[tuple, dict]:
    """(a, b) -> MIXED_COLUMNS of a - b from :func:`fit_mixed`'s result (NaN when None)."""
    out = {}
    for a, b in pairs:
        row = dict.fromkeys(MIXED_COLUMNS, math.nan)
        if fitted is not None:
            fe, cov, names, ref = fitted
            vec = pd.Series(0.0, index=fe.index)
            known = True
            for v, sign in ((a, 1.0), (b, -1.0)):
                if v in names:
                    vec[names[v]] += sign
                elif v != ref:
                    known = False
            if known:
                est = float(vec @ fe)
                se = float(math.sqrt(max(vec @ cov.to_numpy() @ vec, 0.0)))
                z = sps.norm.ppf(0.5 + ci / 2)
                p = 2 * sps.norm.sf(abs(est) / se) if se > 0 else (1.0 if est == 0 else 0.0)
                row = {
                    "mm_diff": est,
                    "mm_ci_low": est - z * se,
                    "mm_ci_high": est + z * se,
                    "mm_p_value": float(p),
                }
        out[(a, b)] = row
    return out


def band_effects(
    tables: dict[tuple[str, str], pd.DataFrame],
    tokens: dict[str, pd.Series],
    metric: str,
    variants: Sequence[str],
    bands: dict[str, list[int]],
    pairs: Sequence[tuple[str, str]],
    ci: float,
) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
    """(a, b) -> band -> MIXED_COLUMNS of a - b: one fit per band of ``bands`` (name -> layers)
    over the per-text band means of every one of ``variants`` (``tables``: (variant, metric)
    -> [layer x sample_id]; ``tokens``: variant -> sample_id -> metric-token count)."""
    out: dict[tuple[str, str], dict[str, dict[str, float]]] = {p: {} for p in pairs}
    for band, ls in bands.items():
        long = []
        for v in variants:
            vals = tables[(v, metric)].loc[ls].mean(axis=0, skipna=False)
            tok = tokens.get(v, pd.Series(dtype=float)).reindex(vals.index)
            long.append(
                pd.DataFrame(
                    {
                        "variant": v,
                        "sample_id": vals.index,
                        "value": vals.values,
                        "n_tokens": tok.to_numpy(dtype=float),
                    }
                )
            )
        effects = pair_effects(fit_mixed(pd.concat(long, ignore_index=True)), pairs, ci)
        for pair, cols in effects.items():
            out[pair][band] = cols
    return out
