"""Search over the text as the page shows it (issue 43, item 6; issue 44): `15%` finds the
problem showing "15% of 80" though its TeX is `15\\%`, `frac` finds no `\\frac`, a search that
finds nothing shows the empty-state row, and PostgreSQL can serve it from a trigram index."""

import pytest
from django.db import connection
from django.urls import reverse

from labeling.filters import DataFilters, problems
from labeling.models import Problem
from labeling.shown_text import shown_text

pytestmark = pytest.mark.django_db

PERCENT = r"What is $15\%$ of 80?"
ESCAPED = r"A shirt costs 15\% less: what is $\frac{3}{4}$ of its price?"
PLAIN = "What is the fraction of apples eaten?"


@pytest.mark.parametrize(
    ("tex", "shown"),
    [
        (PERCENT, "What is 15% of 80?"),
        (ESCAPED, "A shirt costs 15% less: what is 34 of its price?"),
        (r"$\pi r^2 \le 10$, so $\{1, 2\}$", "π r2 ≤ 10, so {1, 2}"),
        (r"$\text{cm}^2$ and \$5", "cm2 and $5"),
        (r"$$\begin{align*} a &= b \\ c \end{align*}$$", "a = b c"),
    ],
)
def test_the_shown_text_is_what_the_page_draws(tex, shown):
    assert shown_text(tex) == shown


@pytest.fixture
def researcher_client(client, make_user):
    client.force_login(make_user("lead", "researcher"))
    return client


@pytest.fixture
def three(make_solution):
    made = {}
    for text in (PERCENT, ESCAPED, PLAIN):
        made[text] = Problem.objects.create(text=text, answer="12")
        make_solution(made[text])
    return made


def listed(response) -> str:
    assert response.status_code == 200
    return response.content.decode()


def test_a_percent_finds_the_problems_that_show_it(researcher_client, three):
    for name in ("problem-list", "solution-list"):
        response = researcher_client.get(reverse(name), {"q": "15%"})
        assert response.status_code == 200
        assert response.context["total"] == 2
    both = researcher_client.get(reverse("problem-list"), {"q": "15% 80"})
    assert [p.text for p in both.context["page"]] == [PERCENT]


def test_a_tex_command_is_not_searched(researcher_client, three):
    response = researcher_client.get(reverse("problem-list"), {"q": "frac"})
    assert [p.text for p in response.context["page"]] == [PLAIN]
    assert response.context["total"] == 1


def test_a_search_that_finds_nothing_shows_the_empty_state_row(researcher_client, three):
    for name, row in (
        ("problem-list", "No problem matches these filters."),
        ("solution-list", "No solution matches these filters."),
        ("label-list", "No label"),
    ):
        page = listed(researcher_client.get(reverse(name), {"q": "zebra"}))
        assert "0 found" in page
        assert row in page


def test_problems_stored_in_bulk_are_searchable(researcher_client):
    Problem.objects.bulk_create(
        [Problem(text=PERCENT, text_hash="a" * 64, answer="12")]  # as the PRM800K import does
    )
    assert [p.text for p in problems(filters=DataFilters(q="15%"))] == [PERCENT]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL index")
def test_postgresql_can_serve_the_search_from_the_trigram_index(three):
    rows = problems(filters=DataFilters(q="apples"))
    with connection.cursor() as cursor:
        # Three rows: a scan, or a walk of the primary key, would win; left only bitmap scans,
        # the planner can still serve the search, which it could not without the index.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        plan = rows.explain()
    assert "problem_shown_text_trgm" in plan


def test_the_admins_solution_search_reads_the_problem_as_shown_its_id_and_the_answer(
    client, make_user, three, make_solution
):
    client.force_login(make_user("root", "admin", is_staff=True, is_superuser=True))
    url = reverse("admin:labeling_solution_changelist")

    def found(term: str) -> set[str]:
        response = client.get(url, {"q": term})
        assert response.status_code == 200
        return {solution.problem.text for solution in response.context["cl"].result_list}

    assert found("15%") == {PERCENT, ESCAPED}
    assert found("frac") == {PLAIN}  # the word, not the TeX command `\frac`
    assert found("15% 80") == {PERCENT}  # every word
    odd = make_solution(three[PLAIN], 1)
    odd.answer = "seventeen"
    odd.save()
    assert {s.pk for s in client.get(url, {"q": "venteen"}).context["cl"].result_list} == {odd.pk}
    Problem.objects.filter(pk=three[PERCENT].pk).update(unique_id="test/algebra/977.json")
    assert found("algebra/977") == {PERCENT}
    assert client.get(url, {"q": "x" * 301}).status_code == 400
