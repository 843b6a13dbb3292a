"""Comparisons over several seeds: the figures a researcher can quote.

One seed is one draw of the pool, the first generation, the labelers' noise, the test set and
every training run; on the synthetic domain two seeds of the same comparison have given data
efficiencies of 2.5x and 1.2x. So `compare_seeds` runs `loop.compare` once per seed (each seed
its own pool, test set and ORM baselines) and `aggregate` reduces the per-seed results to
mean and sample standard deviation over seeds, beside the per-seed values, for:
- data efficiency against uniform selection (`loop.mean_efficiency`, averaged over AUROC
  levels, and the one-point "labels to reach uniform's final AUROC");
- best-of-N at the final generation (the same label budget for all) of the PRM of each
  strategy, the ORM and majority voting, and the paired margins PRM - majority and PRM - ORM
  (paired: the same seed's test set for both, so their spread is the margin's own);
- the learning curves (step AUROC and PRM best-of-largest-N per generation).

`aggregate` reads only `loop.result_dict` payloads, so it runs on stored JSON as well.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from trainer.evaluation.simulation import loop
from trainer.training.metrics import spread

BASELINE = "uniform"


def parse_seeds(text: str) -> tuple[int, ...]:
    """'0,1,2' -> (0, 1, 2): distinct non-negative seeds, in the order given."""
    try:
        seeds = tuple(dict.fromkeys(int(part) for part in text.split(",") if part.strip()))
    except ValueError:
        raise loop.SimulationRefused("seeds take comma-separated integers, e.g. 0,1,2") from None
    if not seeds or min(seeds) < 0:
        raise loop.SimulationRefused("seeds must be one or more non-negative integers.")
    return seeds


def compare_seeds(
    config: loop.SimulationConfig,
    *,
    seeds: Sequence[int],
    strategies: Sequence[str] = loop.STRATEGIES,
    emit: loop.Emit | None = None,
    advanced: Callable[[], None] | None = None,
) -> dict[int, dict[str, loop.SimulationResult]]:
    """`loop.compare` of `strategies` once per seed: seed -> strategy -> result."""
    say = emit or (lambda line: None)
    per_seed = {}
    for seed in seeds:
        say(f"=== seed {seed} ===")
        per_seed[seed] = loop.compare(
            replace(config, seed=seed), strategies=strategies, emit=emit, advanced=advanced
        )
    return per_seed


def payload(per_seed: dict[int, dict[str, loop.SimulationResult]]) -> dict:
    """The JSON of a multi-seed comparison: every seed's own results and the aggregate."""
    runs = {str(seed): loop.result_dict(results) for seed, results in per_seed.items()}
    return {"seeds": list(per_seed), "per_seed": runs, "aggregate": aggregate(runs)}


def aggregate(per_seed: dict[str, dict]) -> dict:
    """Mean ± std over seeds of `loop.result_dict` payloads (seed -> payload); see the module
    doc. Every figure is {"mean", "std", "n", "per_seed"}; a seed without a figure (an AUROC
    level its curves never reached) is left out of that figure's mean and shows as None."""
    seeds = list(per_seed)
    runs = list(per_seed.values())
    strategies = list(runs[0]["strategies"])
    first = runs[0]["strategies"][strategies[0]]
    sizes = [str(n) for n in first["config"]["best_of"]]

    def figure(values: Iterable) -> dict:
        values = list(values)
        return {**spread(values), "per_seed": values}

    efficiency = {}
    for key in (f"mean_efficiency_vs_{BASELINE}", f"efficiency_vs_{BASELINE}"):
        efficiency[key] = {
            name: figure(run["data_efficiency"].get(key, {}).get(name) for run in runs)
            for name in strategies
        }

    def final(run: dict, strategy: str) -> dict:
        return run["strategies"][strategy]["generations"][-1]["best_of_n"]

    verifiers = {f"prm:{name}": (name, "prm") for name in strategies}
    # The same PRM's steps under the min rule (loop.run_simulation), where it was measured.
    verifiers.update({f"prm_min:{name}": (name, "prm_min") for name in strategies})
    verifiers.update({"orm": (BASELINE, "orm"), "majority": (BASELINE, "majority")})

    def at(run: dict, verifier: str, n: str) -> float | None:
        strategy, method = verifiers[verifier]
        by_n = final(run, strategy).get(method)
        return by_n[n]["mean"] if by_n else None

    best_of_n = {
        verifier: {n: figure(at(run, verifier, n) for run in runs) for n in sizes}
        for verifier in verifiers
        if any(at(run, verifier, sizes[0]) is not None for run in runs)
    }
    margins = {}
    for name in strategies:
        for other in ("majority", "orm"):
            if other not in best_of_n:
                continue
            margins[f"prm:{name} - {other}"] = {
                n: figure(_minus(at(run, f"prm:{name}", n), at(run, other, n)) for run in runs)
                for n in sizes
            }

    largest = sizes[-1]
    curves = {}
    for name in strategies:
        rows = [run["strategies"][name]["generations"] for run in runs]
        curves[name] = [
            {
                "generation": generation + 1,
                "labels": figure(r[generation]["labels"] for r in rows),
                "step_auroc": figure(r[generation]["step_auroc"] for r in rows),
                f"prm@{largest}": figure(
                    r[generation]["best_of_n"]["prm"][largest]["mean"] for r in rows
                ),
                f"orm@{largest}": figure(
                    r[generation]["best_of_n"]["orm"][largest]["mean"]
                    if "orm" in r[generation]["best_of_n"]
                    else None
                    for r in rows
                ),
            }
            for generation in range(min(len(r) for r in rows))
        ]
    return {
        "seeds": seeds,
        "best_of": sizes,
        "labels": figure(
            run["strategies"][strategies[0]]["generations"][-1]["labels"] for run in runs
        ),
        "data_efficiency": efficiency,
        "best_of_n": best_of_n,
        "margins": margins,
        "curves": curves,
    }


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 4)


def _pm(fig: dict, digits: int = 3) -> str:
    if fig["mean"] is None:
        return "-"
    return f"{fig['mean']:.{digits}f}±{fig['std']:.{digits}f}"


def _values(fig: dict, digits: int = 3) -> str:
    return " ".join("-" if v is None else f"{v:.{digits}f}" for v in fig["per_seed"])


def table(summary: dict) -> str:
    """The multi-seed table: mean ± sd over seeds, then each seed's value."""
    seeds = ", ".join(map(str, summary["seeds"]))
    sizes = summary["best_of"]
    lines = [f"mean ± sd over seeds {seeds} (per-seed values in that order after '|')"]
    lines.append("")
    lines.append(f"data efficiency vs {BASELINE} (labels {BASELINE} needs / labels it needs)")
    names = {
        f"mean_efficiency_vs_{BASELINE}": f"averaged over {loop.EFFICIENCY_LEVELS} AUROC levels",
        f"efficiency_vs_{BASELINE}": f"at {BASELINE}'s final AUROC (one point)",
    }
    for key, title in names.items():
        for name, fig in summary["data_efficiency"][key].items():
            if name == BASELINE:
                continue
            lines.append(f"  {name + ', ' + title:<62}{_pm(fig, 2):>12}  | {_values(fig, 2)}")
    labels = summary["labels"]["mean"]
    lines.append("")
    lines.append(
        f"{'best-of-N at ' + f'{labels:,.0f}' + ' labels':<34}"
        + "".join(f"{'N=' + n:>14}" for n in sizes)
        + f"  | per seed at N={sizes[-1]}"
    )
    rows = {
        **{
            f"PRM, {k.removeprefix('prm:')}": v
            for k, v in summary["best_of_n"].items()
            if "prm:" in k
        },
        **{
            f"PRM (min), {k.removeprefix('prm_min:')}": v
            for k, v in summary["best_of_n"].items()
            if "prm_min:" in k
        },
        **({"ORM": summary["best_of_n"]["orm"]} if "orm" in summary["best_of_n"] else {}),
        "majority voting": summary["best_of_n"]["majority"],
        **{k.replace("prm:", "PRM, "): v for k, v in summary["margins"].items()},
    }
    for name, by_n in rows.items():
        cells = "".join(f"{_pm(by_n[n]):>14}" for n in sizes)
        lines.append(f"  {name:<32}{cells}  | {_values(by_n[sizes[-1]])}")
    largest = sizes[-1]
    lines.append("")
    lines.append(f"learning curves: step AUROC and PRM best-of-{largest}")
    for name, rows_ in summary["curves"].items():
        for row in rows_:
            lines.append(
                f"  {name:<26}gen {row['generation']}  {row['labels']['mean']:>7,.0f} labels"
                f"  AUROC {_pm(row['step_auroc']):>13}  PRM@{largest} {_pm(row[f'prm@{largest}'])}"
                f"  | {_values(row['step_auroc'])}"
            )
    return "\n".join(lines)


def plot(summary: dict, path: Path) -> Path | None:
    """Mean learning curves over seeds with a ±1 sd band; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    largest = summary["best_of"][-1]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))

    def band(axis, xs, figs, style, **kwargs):
        mean = [f["mean"] for f in figs]
        std = [f["std"] for f in figs]
        (line,) = axis.plot(xs, mean, style, **kwargs)
        axis.fill_between(
            xs,
            [m - s for m, s in zip(mean, std, strict=True)],
            [m + s for m, s in zip(mean, std, strict=True)],
            color=line.get_color(),
            alpha=0.15,
        )

    for name, rows in summary["curves"].items():
        xs = [row["labels"]["mean"] for row in rows]
        band(left, xs, [row["step_auroc"] for row in rows], "o-", label=name)
        band(right, xs, [row[f"prm@{largest}"] for row in rows], "o-", label=f"PRM, {name}")
    rows = summary["curves"].get(BASELINE) or next(iter(summary["curves"].values()))
    with_orm = [row for row in rows if row[f"orm@{largest}"]["mean"] is not None]
    if with_orm:
        xs = [row["labels"]["mean"] for row in with_orm]
        band(
            right,
            xs,
            [row[f"orm@{largest}"] for row in with_orm],
            "s--",
            color="grey",
            label="ORM (uniform samples)",
        )
    majority = summary["best_of_n"]["majority"][largest]
    right.axhline(majority["mean"], linestyle=":", color="black", label="majority voting")
    right.axhspan(
        majority["mean"] - majority["std"],
        majority["mean"] + majority["std"],
        color="black",
        alpha=0.07,
    )
    seeds = ", ".join(map(str, summary["seeds"]))
    return loop.finish_plot(
        figure, left, right, path, largest=largest, note=f" (mean ± sd, seeds {seeds})"
    )
