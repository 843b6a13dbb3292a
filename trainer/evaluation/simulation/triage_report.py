"""What `manage.py simulate --triage` prints and plots of `triage.compare`'s result: per arm,
means and sample standard deviations over the seeds, and paired margins over the uniform
strategy. Reads only the result's JSON, so it runs on a stored `--out` file as well."""

import math
from pathlib import Path

from trainer.evaluation.simulation.triage import DISPLAYS
from trainer.training.metrics import spread


def summarize(result: dict) -> list[dict]:
    """One row per arm: means and standard deviations over the seeds, and the paired margins
    over the uniform strategy (the human-only arm) of step AUROC and PRM best-of-largest-N:
    each seed's arm minus the same seed's uniform, so the test set's draw cancels out."""
    sizes = [str(n) for n in result["config"]["best_of"]]
    arms: dict[tuple[str, str], list[dict]] = {}
    for run in result["runs"]:
        arms.setdefault((run["kind"], run["arm"]), []).append(run)
    baseline = {run["seed"]: run for run in arms.get(("strategy", "uniform"), [])}

    def largest(run: dict) -> float:
        return run["best_of_n"]["prm"][sizes[-1]]["mean"]

    summary = []
    for (kind, arm), runs in arms.items():
        row = {"kind": kind, "arm": arm, "seeds": len(runs)}
        for key in ("solutions", "step_labels", "label_accuracy", "step_auroc", "first_error_f1"):
            row[key] = spread([r[key] for r in runs])
        for n in sizes:
            row[f"prm@{n}"] = spread([r["best_of_n"]["prm"][n]["mean"] for r in runs])
        row["majority"] = spread([r["best_of_n"]["majority"][sizes[-1]]["mean"] for r in runs])
        paired = [(r, baseline[r["seed"]]) for r in runs if r["seed"] in baseline]
        row["auroc_over_uniform"] = spread([r["step_auroc"] - u["step_auroc"] for r, u in paired])
        row["prm_over_uniform"] = spread([largest(r) - largest(u) for r, u in paired])
        summary.append(row)
    return summary


def table(result: dict) -> str:
    sizes = [str(n) for n in result["config"]["best_of"]]
    header = ["kind", "arm", "solutions", "step labels", "label acc", "AUROC", "FE-F1"]
    header += [f"PRM@{n}" for n in sizes] + [f"majority@{sizes[-1]}"]
    header += ["AUROC - uniform", f"PRM@{sizes[-1]} - uniform"]
    lines = [header]
    for row in summarize(result):
        line = [row["kind"], row["arm"], _fmt(row["solutions"]["mean"], digits=0)]
        line += [_fmt(row["step_labels"]["mean"], digits=0), _pm(row["label_accuracy"])]
        line += [_pm(row["step_auroc"]), _pm(row["first_error_f1"])]
        line += [_pm(row[f"prm@{n}"]) for n in sizes] + [_pm(row["majority"])]
        line += [_pm(row["auroc_over_uniform"], sign=True), _pm(row["prm_over_uniform"], sign=True)]
        lines.append(line)
    text = [_columns(lines)]
    search = result["search"]
    text.append(
        "\nrollout completions per solution: "
        + ", ".join(
            f"{key} {_pm(spread([s[key] for s in search]))}"
            for key in ("every_step", "every_step_stopping", "search")
        )
        + f"; search finds the every-step first error in "
        f"{_pm(spread([s['same_first_error'] for s in search]))}"
    )
    for display in DISPLAYS:
        rows = [s for s in result["suggestions"] if s["display"] == display]
        text.append(
            f"labelers, judge {display}: "
            + ", ".join(
                f"{key} {_pm(spread([r[key] for r in rows]))}"
                for key in ("label_accuracy", "judge_agreement", "first_error_exact")
            )
        )
    return "\n".join(text)


def plot(result: dict, path: Path) -> Path | None:
    """Step AUROC and PRM best-of-largest-N per arm, mean and sd over the seeds (bars)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = summarize(result)
    largest = str(result["config"]["best_of"][-1])
    names = {"uniform": "uniform (human only)", "confirm": "human, judge shown"}
    labels = [names.get(r["arm"], r["arm"]) for r in rows]
    colors = {"strategy": "tab:blue", "source": "tab:orange", "display": "tab:green"}
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    for axis, key, title in (
        (axes[0], "step_auroc", "step AUROC"),
        (axes[1], f"prm@{largest}", f"PRM best-of-{largest}"),
    ):
        means = [r[key]["mean"] or 0.0 for r in rows]
        stds = [r[key]["std"] or 0.0 for r in rows]
        axis.bar(
            range(len(rows)),
            means,
            yerr=stds,
            color=[colors[r["kind"]] for r in rows],
            capsize=3,
        )
        axis.set_xticks(range(len(rows)), labels, rotation=40, ha="right", fontsize=8)
        axis.set_title(f"{title}, mean ± sd over {len(result['config']['seeds'])} seeds")
        low = min(m - s for m, s in zip(means, stds, strict=True))
        axis.set_ylim(max(0.0, math.floor(low * 20) / 20 - 0.05), 1.0)
    budget = result["config"]["first"] + result["config"]["rounds"] * result["config"]["batch"]
    figure.suptitle(
        f"Equal human budget ({budget} labeled solutions): strategies (blue), "
        "label sources (orange), judge shown (green)",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _columns(lines: list[list[str]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join(
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True))
        for line in lines
    )


def _pm(value: dict, *, sign: bool = False) -> str:
    if value["mean"] is None:
        return "-"
    return f"{value['mean']:{'+' if sign else ''}.3f}±{value['std']:.3f}"


def _fmt(value, *, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
