"""``ios-bench ops fit``: train the stage-latency predictor and measure its error on held-out networks.

The predictor is a LightGBM regressor of ``log(latency_ms / roofline estimate)`` over the stage
features (:func:`ios_core.cost.features.feature_names`), the roofline terms
(:func:`ios_core.cost.features.roof_terms`) and a one-hot of the kernel provider. The roofline
uses the throughputs attained by the single operators of the training rows (per provider and
thread budget: the median MACs per ms of those that multiply, bytes per ms of the others);
they are estimated from the training rows only, and saved with the model. Its error is
measured on networks it never saw: with ``holdout`` named, train on the other networks and test
on those; otherwise leave one network out at a time (each network is the test set once). The
error of a stage is ``|predicted / measured - 1|``; the report gives its median and 90th
percentile per held-out network. The saved model is then fitted on every row.

Rows are measured on one machine: a dataset holding several machines is refused unless one is
named, since a predictor fitted across machines would describe none of them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ios_bench.errors import InputError
from ios_bench.ops.dataset import feature_columns
from ios_core.atomic import atomic_write_text
from ios_core.cost.features import ROOF_NAMES, attained_peaks, feature_names, roof_terms
from ios_core.cost.learned import FORMAT, TARGET, default_model_path, peak_key, provider_features

PARAMS = {"objective": "regression", "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 5,
          "feature_fraction": 0.9, "bagging_fraction": 0.9, "bagging_freq": 1, "lambda_l2": 1.0, "verbose": -1,
          "seed": 0, "deterministic": True, "force_row_wise": True}
ROUNDS = 300


def select_machine(df, machine: str | None):
    machines = sorted(df["machine"].unique())
    if machine is not None:
        if machine not in machines:
            raise InputError(f"machine {machine!r} is not in the dataset (it has {', '.join(machines)})")
        return df[df["machine"] == machine], machine
    if len(machines) > 1:
        raise InputError(f"the dataset holds {len(machines)} machines ({', '.join(machines)}); name one with --machine")
    return df, machines[0]


def peaks_of(df) -> dict[str, list[float]]:
    """Attained throughputs ``[macs per ms, bytes per ms]`` per provider and thread budget
    (key ``provider/threads``), from the single operators among ``df``'s rows."""
    one = df[(df["n_groups"] == 1) & (df["n_ops"] == 1) & (df["kind"] == "parallel")]
    out = {}
    for (prov, t), g in one.groupby(["provider", "threads"]):
        try:
            out[peak_key(prov, int(t))] = list(attained_peaks(zip(g["f_macs"], g["f_bytes"], g["latency_ms"])))
        except ValueError:
            continue
    return out


def matrix(df, providers: list[str], peaks: dict) -> tuple[np.ndarray, np.ndarray]:
    """(the model's input rows, the log roofline estimate each prediction is relative to)."""
    feats = df[feature_columns()].to_numpy(dtype=np.float64)
    roof = []
    for work, t, prov in zip(df["_work"], df["threads"], df["provider"]):
        peak = peaks.get(peak_key(prov, int(t)))
        if peak is None:
            raise InputError(f"no single operators measured with {prov} at {t} threads to estimate the "
                             f"attained throughput from")
        roof.append(roof_terms(work, int(t), peak))
    roof = np.array(roof, dtype=np.float64).reshape(len(df), len(ROOF_NAMES))
    prov = np.array([provider_features(p, providers) for p in df["provider"]], dtype=np.float64)
    return np.concatenate([feats, roof, prov.reshape(len(df), len(providers))], axis=1), roof[:, 0]


def train(df, providers: list[str], peaks: dict, rounds: int = ROUNDS, threads: int | None = None):
    import lightgbm as lgb

    params = dict(PARAMS, num_threads=threads or 1)
    x, offset = matrix(df, providers, peaks)
    ds = lgb.Dataset(x, np.log(df["latency_ms"].to_numpy(dtype=np.float64)) - offset, free_raw_data=True)
    return lgb.train(params, ds, num_boost_round=rounds)


def errors(booster, df, providers: list[str], peaks: dict) -> np.ndarray:
    x, offset = matrix(df, providers, peaks)
    pred = np.exp(booster.predict(x, num_threads=1) + offset)
    return np.abs(pred / df["latency_ms"].to_numpy(dtype=np.float64) - 1.0)


def evaluate(df, providers: list[str], holdout: list[str] | None, rounds: int = ROUNDS) -> list[dict]:
    """Held-out error rows: one per test set (a held-out network), plus ``all`` pooling them.
    Each split's throughputs and booster come from its training rows alone."""
    models = sorted(df["model"].unique())
    if holdout:
        unknown = [m for m in holdout if m not in models]
        if unknown:
            raise InputError(f"held-out networks {unknown} are not in the dataset (it has {', '.join(models)})")
        if set(holdout) >= set(models):
            raise InputError("every network is held out: nothing is left to train on")
        splits = [(",".join(holdout), df[~df["model"].isin(holdout)], df[df["model"].isin(holdout)])]
    else:
        if len(models) < 2:
            raise InputError(f"held-out evaluation needs at least 2 networks in the dataset, it has {models}")
        splits = [(m, df[df["model"] != m], df[df["model"] == m]) for m in models]
    rows, pooled = [], []
    for name, tr, te in splits:
        peaks = peaks_of(tr)
        err = errors(train(tr, providers, peaks, rounds), te, providers, peaks)
        pooled.append(err)
        rows.append(_row(name, len(tr), err))
    if len(splits) > 1:
        rows.append(_row("all", None, np.concatenate(pooled)))
    return rows


def spread(df) -> dict:
    """The measurement noise within the dataset: per row, the median of |sample / median - 1|
    over its samples; the median and 90th percentile over rows."""
    rel = [float(np.median(np.abs(np.asarray(s, dtype=np.float64) / np.median(s) - 1.0)))
           for s in df["samples_ms"] if len(s) > 1 and np.median(s) > 0]
    if not rel:
        return {}
    return {"median": float(np.median(rel)), "p90": float(np.percentile(rel, 90)), "rows": len(rel)}


def _row(name: str, train_rows: int | None, err: np.ndarray) -> dict:
    return {"held_out": name, "train_rows": train_rows, "test_rows": int(len(err)),
            "median_error": float(np.median(err)), "p90_error": float(np.percentile(err, 90)),
            "within_10pct": float(np.mean(err <= 0.10))}


def fit(df, out: Path, holdout: list[str] | None = None, machine: str | None = None, rounds: int = ROUNDS) -> dict:
    """Evaluate on held-out networks, fit on every row, write the model file; returns its document."""
    if df.empty:
        raise InputError("the dataset is empty: run `ios-bench ops collect` first")
    missing = [c for c in (*feature_columns(), "op_work") if c not in df.columns]
    if missing:
        raise InputError(f"the dataset was collected with other features ({len(missing)} missing, e.g. "
                         f"{missing[0]}); collect it again with this version")
    df, machine = select_machine(df, machine)
    df = df[np.isfinite(df["latency_ms"]) & (df["latency_ms"] > 0)]
    disturbed = 0
    # rows measured on a disturbed machine (ios_core.measurement.interference) are left out
    if "disturbed" in df.columns:
        bad = df["disturbed"].fillna("").astype(str) != ""
        disturbed, df = int(bad.sum()), df[~bad]
        if df.empty:
            raise InputError(f"every row of the dataset ({disturbed}) was measured on a disturbed machine: "
                             "collect it again on a quiet one")
    df = df.assign(_work=[json.loads(w) for w in df["op_work"]])
    providers = sorted(df["provider"].unique())
    t0 = time.perf_counter()
    report = evaluate(df, providers, holdout, rounds)
    peaks = peaks_of(df)
    booster = train(df, providers, peaks, rounds)
    first = df.iloc[0]
    doc = {"format": FORMAT, "features": feature_names() + ROOF_NAMES, "target": TARGET, "peaks": peaks,
           "providers": providers, "machine": machine,
           "cpu_model": str(first.get("cpu_model", "")), "cores": int(first.get("cores", 0) or 0),
           "versions": json.loads(first["versions"]) if "versions" in df.columns else {},
           "thread_env": json.loads(first["thread_env"]) if "thread_env" in df.columns else {},
           "rows": int(len(df)), "networks": sorted(df["model"].unique()), "threads": sorted(
               int(t) for t in df["threads"].unique()), "batches": sorted(int(b) for b in df["batch"].unique()),
           "params": PARAMS, "rounds": rounds, "held_out": report, "spread": spread(df),
           "disturbed_rows_left_out": disturbed,
           "fit_seconds": round(time.perf_counter() - t0, 3),
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "booster": booster.model_to_string()}
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(doc))
    return doc


def format_report(doc: dict) -> list[str]:
    lines = [f"{doc['rows']} rows, {len(doc['networks'])} networks, providers {', '.join(doc['providers'])}, "
             f"threads {doc['threads']}, batches {doc['batches']} (machine {doc['machine']}: {doc['cpu_model']})",
             "held-out error |predicted/measured - 1|:",
             f"  {'held out':<24} {'train':>6} {'test':>6} {'median':>8} {'p90':>8} {'<=10%':>6}"]
    for r in doc["held_out"]:
        train_rows = "" if r["train_rows"] is None else str(r["train_rows"])
        lines.append(f"  {r['held_out']:<24} {train_rows:>6} {r['test_rows']:>6} {r['median_error']:>7.1%} "
                     f"{r['p90_error']:>7.1%} {r['within_10pct']:>6.0%}")
    sp = doc.get("spread") or {}
    if sp:
        lines.append(f"measurement spread within a row (|sample/median - 1|, over {sp['rows']} rows): "
                     f"median {sp['median']:.1%}, p90 {sp['p90']:.1%}")
    return lines


__all__ = ["default_model_path", "evaluate", "fit", "format_report"]
