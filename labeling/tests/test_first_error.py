"""Agreement on the first-error position (ProcessBench's measure): Krippendorff's alpha at the
interval and ordinal metrics against his published example, the positions a label gives, the
edge cases, and the figures of a constructed overlap on /quality/ and in the API."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from labeling import first_error
from labeling.agreement import Label, krippendorff_alpha, overlapping_labels
from labeling.models import Generation, Problem
from labeling.services import overlap
from labeling.services.workbench import next_session, rate_step, submit_session

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: four observers,
# twelve units, some values missing. His figures: nominal 0.743, ordinal 0.815, interval 0.849.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def test_krippendorffs_example_gives_his_interval_and_ordinal_alpha():
    units = [
        [(observer, row[u]) for observer, row in enumerate(KRIPPENDORFF_2011) if row[u] is not None]
        for u in range(12)
    ]
    assert krippendorff_alpha(units, metric="interval") == pytest.approx(0.849, abs=5e-4)
    assert krippendorff_alpha(units, metric="ordinal") == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(units) == pytest.approx(0.743, abs=5e-4)  # nominal, unchanged
    with pytest.raises(ValueError, match="ratio"):
        krippendorff_alpha(units, metric="ratio")


def test_the_metrics_weigh_a_near_miss_less_than_a_far_one():
    # One unit of three disagrees in both: by one step, or by seven. Nominal alpha barely
    # tells them apart; interval and ordinal do.
    near = [[(0, 2), (1, 3)], [(0, 5), (1, 5)], [(0, 9), (1, 9)]]
    far = [[(0, 2), (1, 9)], [(0, 5), (1, 5)], [(0, 9), (1, 9)]]
    assert krippendorff_alpha(near) - krippendorff_alpha(far) < 0.1
    assert krippendorff_alpha(near, metric="interval") > 0.95
    assert krippendorff_alpha(far, metric="interval") < 0.1
    assert krippendorff_alpha(near, metric="ordinal") > 0.9
    assert krippendorff_alpha(far, metric="ordinal") < 0.2


def test_a_labels_position_is_its_first_minus_one_or_one_past_the_last_step():
    assert first_error.position(ratings=[1, 0, -1], steps=4) == 2
    assert first_error.position(ratings={0: 1, 1: -1, 2: -1}, steps=4) == 1
    assert first_error.position(ratings=[1, 1, 0, 1], steps=4) == 4  # no error: n
    assert first_error.position(ratings=[1, 1], steps=4) is None  # stopped: undecided
    assert first_error.position(ratings={0: 1, 2: -1}, steps=4) is None  # a gap before the -1


def label(labeler_id: int, ratings: list[int], reason: str, *, solution_id: int) -> Label:
    return Label(
        session_id=0,
        solution_id=solution_id,
        labeler_id=labeler_id,
        generation_id=None,
        finish_reason=reason,
        submitted_at=timezone.now(),
        adjudicated=False,
        ratings=dict(enumerate(ratings)),
    )


@pytest.fixture
def solutions(make_solution):
    problem = Problem.objects.create(text="What is $2+3$?", answer="5")
    four = [make_solution(problem, n) for n in range(3)]  # 4 steps each
    three = make_solution(problem, 9, steps=["Add.", "Five.", "# Answer\n\n5"])
    return four, three


@pytest.mark.django_db
def test_one_labeler_only_gives_no_pair_and_no_alpha(solutions):
    (a, _, _), _ = solutions
    # The same labeler twice (a quality-control solution served again) is not two labelers.
    figures = first_error.between_labelers(
        {a.pk: [label(1, [1, -1], "found_error", solution_id=a.pk)] * 2}
    )
    assert (figures.solutions, figures.pairs) == (0, 0)
    assert figures.exact_rate is None and figures.within_one_rate is None
    assert figures.alpha_interval is None and figures.alpha_ordinal is None


@pytest.mark.django_db
def test_all_no_error_agrees_exactly_and_alpha_needs_positions_that_differ(solutions):
    four, three = solutions
    same_length = {
        s.pk: [label(1, [1] * 4, "solution", solution_id=s.pk)]
        + [label(2, [1, 0, 1, 1], "solution", solution_id=s.pk)]
        for s in four
    }
    figures = first_error.between_labelers(same_length)
    assert (figures.pairs, figures.exact, figures.within_one) == (3, 3, 3)
    # Every position is 4: nothing to tell apart, so alpha is undefined, not perfect.
    assert figures.alpha_interval is None and figures.alpha_ordinal is None
    # With a 3-step solution, "no error" is position 3 there: the units differ and agree.
    mixed = dict(same_length)
    mixed[three.pk] = [label(who, [1] * 3, "solution", solution_id=three.pk) for who in (1, 2)]
    figures = first_error.between_labelers(mixed)
    assert figures.exact_rate == 1.0
    assert figures.alpha_interval == pytest.approx(1.0) and figures.alpha_ordinal == 1.0


@pytest.mark.django_db
def test_tied_positions_and_an_error_on_the_last_step_against_no_error(solutions):
    (a, b, c), _ = solutions
    by_solution = {
        # Three labelers, two tied at step 1: three pairs, one exact, all within one.
        a.pk: [
            label(1, [1, -1], "found_error", solution_id=a.pk),
            label(2, [1, -1], "found_error", solution_id=a.pk),
            label(3, [-1], "found_error", solution_id=a.pk),
        ],
        # An error on the last step (3) and no error (4) are one step apart.
        b.pk: [
            label(1, [1, 1, 1, -1], "found_error", solution_id=b.pk),
            label(2, [1, 1, 1, 1], "solution", solution_id=b.pk),
        ],
        c.pk: [
            label(1, [-1], "found_error", solution_id=c.pk),
            label(2, [1, 1, 1, 1], "solution", solution_id=c.pk),
        ],
    }
    figures = first_error.between_labelers(by_solution)
    assert (figures.solutions, figures.pairs, figures.exact, figures.within_one) == (3, 5, 1, 4)
    assert figures.exact_rate == pytest.approx(1 / 5)
    assert figures.within_one_rate == pytest.approx(4 / 5)


@pytest.mark.django_db
def test_a_given_up_label_has_no_position_and_leaves_its_pair_out(solutions):
    (a, b, _), _ = solutions
    figures = first_error.between_labelers(
        {
            a.pk: [
                label(1, [1, -1], "give_up", solution_id=a.pk),
                label(2, [1, 1, -1], "found_error", solution_id=a.pk),
            ],
            b.pk: [
                label(1, [1], "bad_problem", solution_id=b.pk),
                label(2, [-1], "found_error", solution_id=b.pk),
            ],
        }
    )
    assert (figures.solutions, figures.pairs) == (0, 0)
    assert figures.alpha_interval is None


# --- a constructed overlap, through the labeling services, on the page and in the API ---------

# Four 4-step solutions, each labeled by Ann and Bob (ratings, finish reason).
PLAN = {
    0: {"ann": ([1, 1, -1], "found_error"), "bob": ([1, 1, -1], "found_error")},  # 2, 2
    1: {"ann": ([1, -1], "found_error"), "bob": ([1, 1, -1], "found_error")},  # 1, 2
    2: {"ann": ([1, 1, 1, 1], "solution"), "bob": ([-1], "found_error")},  # 4 (none), 0
    3: {"ann": ([1], "give_up"), "bob": ([1, 1, 1, -1], "found_error")},  # left out
}


@pytest.fixture
def overlap_labeled(make_labeler, make_solution):
    generation = Generation.objects.create(number=1)
    problem = Problem.objects.create(text="What is $2+3$?", answer="5")
    solutions = [make_solution(problem, n, generation=generation) for n in range(4)]
    overlap.set_overlap(generation=generation, share=1.0, labelers=2)
    which = {solution.pk: n for n, solution in enumerate(solutions)}
    now = timezone.now()
    for name in ("ann", "bob"):
        labeler = make_labeler(name)
        while served := next_session(labeler=labeler, now=now):
            ratings, reason = PLAN[which[served.session.solution_id]][name]
            for index, rating in enumerate(ratings):
                rate_step(
                    session_id=served.session.pk, labeler=labeler, step_index=index, rating=rating
                )
            submit_session(
                session_id=served.session.pk,
                labeler=labeler,
                finish_reason=reason,
                finish_reason_text="Too long for me." if reason == "give_up" else "",
            )
            now += timedelta(seconds=1)
    return solutions


# By hand. Pairs: (2, 2), (1, 2), (4, 0); the give-up leaves solution 3 out. Exact 1/3, within
# one step 2/3. Pairable values 0, 1, 2, 2, 2, 4 (n = 6); each unit has two values, so every
# pair weighs 2 and the observed disagreement is 2 * sum(delta) / 6.
# Interval: delta = (a - b)^2 -> 0 + 1 + 16 = 17; expected = 2 * sum over value pairs c < k of
# n_c n_k (c - k)^2 / (6 * 5) = 2 * (1 + 12 + 16 + 3 + 9 + 12) / 30 = 106/30;
# alpha = 1 - (34/6) / (106/30) = -0.604.
# Ordinal: ranks 0 (1), 1 (1), 2 (3), 4 (1); delta(c, k) = (n from c to k - (n_c + n_k)/2)^2:
# (0,1) 1, (0,2) 9, (0,4) 25, (1,2) 4, (1,4) 16, (2,4) 4. Observed 2 * (0 + 4 + 25) / 6;
# expected 2 * (1 + 27 + 25 + 12 + 16 + 12) / 30 = 186/30; alpha = 1 - (58/6) / (186/30) = -0.559.
INTERVAL = 1 - (34 / 6) / (106 / 30)
ORDINAL = 1 - (58 / 6) / (186 / 30)


@pytest.mark.django_db
def test_the_overlap_gives_the_figures_computed_by_hand(overlap_labeled):
    figures = first_error.between_labelers(overlapping_labels())
    assert (figures.solutions, figures.pairs, figures.exact, figures.within_one) == (3, 3, 1, 2)
    assert figures.alpha_interval == pytest.approx(INTERVAL)
    assert figures.alpha_ordinal == pytest.approx(ORDINAL)


@pytest.mark.django_db
def test_quality_page_and_api_show_the_first_error_figures(client, make_user, overlap_labeled):
    client.force_login(make_user("rita", "researcher"))
    html = client.get(reverse("quality")).content.decode()
    section = html.split('<h2 id="first-error">')[1]
    row = section.split('data-first-error="labelers"')[1].split("</tr>")[0]
    assert '"pairs">3<' in row
    assert '"exact">33%<' in row and '"within-one">67%<' in row
    assert '"alpha-interval">-0.604<' in row and '"alpha-ordinal">-0.559<' in row
    assert "one step past the last step" in section  # the convention, stated

    body = client.get(reverse("api-first-error-agreement")).json()
    assert body["no_error_position"] == "steps"
    labelers = body["between_labelers"]
    assert {k: labelers[k] for k in ("solutions", "pairs", "exact", "within_one")} == {
        "solutions": 3,
        "pairs": 3,
        "exact": 1,
        "within_one": 2,
    }
    assert labelers["exact_rate"] == pytest.approx(1 / 3)
    assert labelers["alpha_interval"] == pytest.approx(INTERVAL)
    assert labelers["alpha_ordinal"] == pytest.approx(ORDINAL)
    # Human labels against the machine sources: none here, so no pair and no alpha.
    human_rollout = next(
        pair
        for pair in body["between_sources"]
        if [pair["first"], pair["second"]] == ["human", "rollout"]
    )
    assert human_rollout["figures"]["pairs"] == 0
    assert human_rollout["figures"]["alpha_interval"] is None


@pytest.mark.django_db
def test_only_researchers_and_admins_read_the_figures(client, make_user):
    client.force_login(make_user("ann", "annotator"))
    assert client.get(reverse("api-first-error-agreement")).status_code == 403
    client.logout()
    assert client.get(reverse("api-first-error-agreement")).status_code in (401, 403)
