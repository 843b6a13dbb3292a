"""Comparisons over several seeds: the aggregate on known numbers, and `simulate --compare
--seeds` end to end at toy size."""

import io
import json
import math

import pytest
from django.core.management import CommandError, call_command

from trainer.evaluation.simulation import loop, seeds


def _result(*, slope: float, prm: float, orm: float, majority: float) -> loop.SimulationResult:
    # AUROC = 0.5 + slope * labels: the labels to reach any level are (level - 0.5) / slope,
    # so a strategy's data efficiency against uniform is the slopes' ratio, at every level.
    rows = [
        {
            "generation": k + 1,
            "labels": labels,
            "step_auroc": 0.5 + slope * labels,
            "best_of_n": {
                "prm": {"4": {"mean": prm - 0.1, "std": 0.0}, "64": {"mean": prm, "std": 0.0}},
                "orm": {"4": {"mean": orm - 0.1, "std": 0.0}, "64": {"mean": orm, "std": 0.0}},
                "majority": {
                    "4": {"mean": majority - 0.1, "std": 0.0},
                    "64": {"mean": majority, "std": 0.0},
                },
            },
        }
        for k, labels in enumerate([500, 1000, 1500])
    ]
    return loop.SimulationResult(config={"best_of": [4, 64]}, pool={}, generations=rows)


def _seed(*, selected_slope: float, prm: float, majority: float) -> dict:
    results = {
        "convincing_wrong_answer": _result(
            slope=selected_slope, prm=prm, orm=0.70, majority=majority
        ),
        "uniform": _result(slope=0.0002, prm=0.75, orm=0.70, majority=majority),
    }
    return loop.result_dict(results)


def test_the_aggregate_is_mean_and_sample_sd_over_seeds_beside_each_seed():
    # Seed 0: selection learns 1.5x as fast as uniform, its PRM 0.80 at best-of-64 against
    # majority voting's 0.76; seed 1: 1.2x, 0.70 against 0.74.
    per_seed = {
        "0": _seed(selected_slope=0.0003, prm=0.80, majority=0.76),
        "1": _seed(selected_slope=0.00024, prm=0.70, majority=0.74),
    }

    summary = seeds.aggregate(per_seed)

    assert summary["seeds"] == ["0", "1"]
    efficiency = summary["data_efficiency"]["mean_efficiency_vs_uniform"]
    assert efficiency["convincing_wrong_answer"]["per_seed"] == pytest.approx([1.5, 1.2], abs=1e-3)
    assert efficiency["convincing_wrong_answer"]["mean"] == pytest.approx(1.35, abs=1e-3)
    # The sample sd of two values is their distance over sqrt(2).
    assert efficiency["convincing_wrong_answer"]["std"] == pytest.approx(0.3 / math.sqrt(2), 1e-3)
    assert efficiency["uniform"]["mean"] == 1.0 and efficiency["uniform"]["std"] == 0.0
    one_point = summary["data_efficiency"]["efficiency_vs_uniform"]["convincing_wrong_answer"]
    assert one_point["mean"] == pytest.approx(1.35, abs=0.01)

    prm = summary["best_of_n"]["prm:convincing_wrong_answer"]["64"]
    assert prm["mean"] == pytest.approx(0.75) and prm["std"] == pytest.approx(0.1 / math.sqrt(2))
    assert summary["best_of_n"]["majority"]["64"]["mean"] == pytest.approx(0.75)
    assert summary["best_of_n"]["orm"]["4"]["mean"] == pytest.approx(0.60)
    # Margins are paired per seed: +0.04 and -0.04, so their mean is 0 with sd 0.057, not a
    # difference of two means that hides which seed won.
    margin = summary["margins"]["prm:convincing_wrong_answer - majority"]["64"]
    assert margin["per_seed"] == pytest.approx([0.04, -0.04])
    assert margin["mean"] == pytest.approx(0.0, abs=1e-9)
    assert margin["std"] == pytest.approx(0.08 / math.sqrt(2))

    curve = summary["curves"]["uniform"]
    assert [row["labels"]["mean"] for row in curve] == [500, 1000, 1500]
    assert curve[-1]["step_auroc"]["mean"] == pytest.approx(0.8)

    text = seeds.table(summary)
    assert "1.35±0.21  | 1.50 1.20" in text
    assert "0.750±0.071" in text


def test_a_seed_without_a_figure_is_left_out_of_its_mean_and_shown_as_none():
    flat = _seed(selected_slope=0.0003, prm=0.8, majority=0.7)
    flat["data_efficiency"] = {}  # e.g. curves that share no AUROC range
    summary = seeds.aggregate({"0": _seed(selected_slope=0.0003, prm=0.8, majority=0.7), "1": flat})

    figure = summary["data_efficiency"]["mean_efficiency_vs_uniform"]["convincing_wrong_answer"]
    assert figure["per_seed"][1] is None
    assert figure["n"] == 1 and figure["mean"] == pytest.approx(1.5, abs=1e-3)


def test_seeds_are_a_comma_separated_list():
    assert seeds.parse_seeds("0, 1,2,1") == (0, 1, 2)
    for bad in ("", "a", "-1"):
        with pytest.raises(loop.SimulationRefused):
            seeds.parse_seeds(bad)


@pytest.mark.django_db
def test_compare_over_two_seeds_writes_each_seed_and_the_aggregate(settings, tmp_path):
    settings.PRM_MODEL_DIR = tmp_path / "models"
    settings.PRM_HEARTBEAT_SECONDS = 3600
    out = tmp_path / "compare.json"
    stdout = io.StringIO()
    call_command(
        "simulate",
        "--compare",
        *("--seeds", "3,4", "--generations", "2", "--labels-per-generation", "30"),
        *("--pool-size", "160", "--samples-per-problem", "8", "--labelers", "1"),
        *("--test-problems", "6", "--test-samples", "16", "--best-of", "1,4"),
        *("--trials", "5", "--epochs", "1", "--out", str(out)),
        stdout=stdout,
        stderr=io.StringIO(),
    )

    payload = json.loads(out.read_text())
    assert payload["seeds"] == [3, 4]
    assert set(payload["per_seed"]) == {"3", "4"}
    for run in payload["per_seed"].values():
        assert set(run["strategies"]) == set(loop.STRATEGIES)
        assert [row["labels"] for row in run["strategies"]["uniform"]["generations"]] == [30, 60]
    # The seeds are different draws: their pools and test sets differ.
    first, second = (payload["per_seed"][s]["strategies"]["uniform"] for s in ("3", "4"))
    assert first["config"]["seed"] == 3 and second["config"]["seed"] == 4
    assert first["generations"] != second["generations"]

    aggregate = payload["aggregate"]
    majority = aggregate["best_of_n"]["majority"]["4"]
    per_seed = [
        payload["per_seed"][s]["strategies"]["uniform"]["generations"][-1]["best_of_n"]["majority"][
            "4"
        ]["mean"]
        for s in ("3", "4")
    ]
    assert majority["per_seed"] == per_seed
    assert majority["mean"] == pytest.approx(sum(per_seed) / 2)
    text = stdout.getvalue()
    assert "--- seed 3 ---" in text and "--- over seeds 3, 4 ---" in text
    assert "majority voting" in text
    # The same PRMs' steps under the min rule, beside the product (the default).
    assert set(aggregate["best_of_n"]) >= {f"prm_min:{name}" for name in loop.STRATEGIES}
    assert "PRM (min), uniform" in text
    assert (tmp_path / "compare.png").exists()


def test_compare_refuses_seeds_that_are_not_integers():
    with pytest.raises(CommandError, match="comma-separated"):
        call_command("simulate", "--compare", "--seeds", "one,two", stdout=io.StringIO())
