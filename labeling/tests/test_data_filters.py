"""Issue 30, point 15: problems, solutions and labels narrowed by the data filters in the URL,
paginated, and the PRM800K export of exactly what they keep, previewed before the download."""

import json
from urllib.parse import parse_qs

import pytest
from django.urls import reverse

from core.params import names
from labeling import filters
from labeling.filters import DataFilters
from labeling.models import Problem, Solution
from labeling.tests.data_fixtures import make_data
from labeling.tests.test_math_on_pages import raw_tex

pytestmark = pytest.mark.django_db


@pytest.fixture
def data(make_user):
    return make_data(make_user)


@pytest.fixture
def researcher(client, make_user):
    client.force_login(make_user("rita", "researcher"))
    return client


@pytest.fixture
def admin(client, make_user):
    client.force_login(make_user("ada", "admin"))
    return client


def shown(client, name: str, query: dict) -> set[int]:
    response = client.get(reverse(name), query)
    assert response.status_code == 200, response.content.decode()[:500]
    return {row.pk for row in response.context["page"].object_list}


# Each filter alone, then together: the solutions each keeps.
SOLUTION_CASES = [
    ({"q": "apples"}, {"right", "wrong"}),
    ({"q": "TRIANGLE area"}, {"ungraded"}),
    ({"subject": "geometry"}, {"ungraded"}),
    ({"level": "2"}, {"right", "wrong"}),
    ({"split": "test"}, {"ungraded"}),
    ({"generation": "2"}, {"wrong", "ungraded"}),
    ({"source": "gpt-4"}, {"right", "ungraded"}),
    ({"correct": "correct"}, {"right"}),
    ({"correct": "wrong"}, {"wrong"}),
    ({"correct": "ungraded"}, {"ungraded"}),
    ({"labeled": "true"}, {"right", "ungraded"}),
    ({"labeled": "false"}, {"wrong"}),
    ({"prm_min": "0.5"}, {"right"}),
    ({"prm_max": "0.5"}, {"wrong"}),
    ({"prm_min": "0.1", "prm_max": "0.95"}, {"right", "wrong"}),
    ({"source": "gpt-4", "labeled": "true", "level": "2"}, {"right"}),
    ({"q": "apples", "correct": "ungraded"}, set()),
    ({}, {"right", "wrong", "ungraded"}),
]


@pytest.mark.parametrize(("query", "kept"), SOLUTION_CASES)
def test_each_filter_and_their_combination_narrow_the_solutions_page(researcher, data, query, kept):
    assert shown(researcher, "solution-list", query) == {data[name].pk for name in kept}


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ({"q": "apples"}, {"apples"}),
        ({"level": "5"}, {"triangle"}),
        ({"correct": "ungraded"}, {"triangle"}),
        ({"source": "llama"}, {"apples"}),
        ({"labeled": "false"}, {"apples"}),
        ({"generation": "1", "subject": "Geometry"}, set()),
    ],
)
def test_the_problems_page_keeps_problems_with_a_kept_solution(researcher, data, query, kept):
    assert shown(researcher, "problem-list", query) == {data[name].pk for name in kept}


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ({}, {"right_label", "ungraded_label"}),
        ({"subject": "algebra"}, {"right_label"}),
        ({"correct": "ungraded"}, {"ungraded_label"}),
        ({"generation": "1"}, {"right_label"}),
        ({"correct": "wrong"}, set()),
    ],
)
def test_the_labels_page_lists_submitted_labels_of_kept_solutions(researcher, data, query, kept):
    assert shown(researcher, "label-list", query) == {data[name].pk for name in kept}


def test_the_data_pages_are_in_the_navigation_and_show_math_not_tex(researcher, data):
    page = researcher.get(reverse("problem-list")).content.decode()
    for name in ("solution-list", "label-list"):
        assert f'href="{reverse(name)}"' in page
    for name in ("problem-list", "solution-list", "label-list"):
        html = researcher.get(reverse(name)).content.decode()
        assert raw_tex(html) == [], name
        assert '<span class="math"' in html


def test_a_filtered_url_round_trips_and_its_page_links_keep_the_filters(researcher, data):
    query = {"q": "apples", "source": "gpt-4", "correct": "correct", "prm_min": "0.5"}
    chosen = filters.from_query(query)
    assert chosen == DataFilters(q="apples", source="gpt-4", correct="correct", prm_min=0.5)
    again = {k: v[0] for k, v in parse_qs(filters.to_query(chosen)).items()}
    assert filters.from_query(again) == chosen

    response = researcher.get(reverse("solution-list"), query)
    html = response.content.decode()
    # The form shows the filters it was given, and the links to the other pages carry them.
    assert 'value="apples"' in html
    link = f"{reverse('label-list')}?{filters.to_query(chosen)}".replace("&", "&amp;")
    assert link in html


def test_a_bad_filter_is_refused_beside_its_field(researcher, data):
    response = researcher.get(reverse("solution-list"), {"correct": "maybe", "level": "9"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "correct must be one of correct, wrong, ungraded." in html
    assert "level must be between 1 and 5." in html
    response = researcher.get(reverse("solution-list"), {"prm_min": "0.8", "prm_max": "0.2"})
    assert response.status_code == 400
    assert "PRM score range is empty" in response.content.decode()


def test_a_search_past_its_words_or_length_is_refused_before_any_query(
    researcher, data, settings, django_assert_max_num_queries
):
    # Issue 41, item 10: each word of a search is one more scan of every problem's text.
    settings.SEARCH_MAX_WORDS, settings.SEARCH_MAX_CHARS = 3, 40
    kept = shown(researcher, "solution-list", {"q": "apples apples apples"})
    assert kept == {data["right"].pk, data["wrong"].pk}
    api = researcher.get("/api/solutions/", {"q": " ".join(["apples"] * 4)})
    assert api.status_code == 400 and "at most 3 words" in api.content.decode()
    with django_assert_max_num_queries(12):  # the session and the user, never the search
        page = researcher.get(reverse("problem-list"), {"q": "a" * 20_000})
    assert page.status_code == 400 and "at most 40 characters" in page.content.decode()
    assert len(page.content) < 200_000  # the refusal does not echo the search


def test_pages_of_fifty_keep_the_filters(researcher, data):
    problem = data["apples"]
    for n in range(60):
        Solution.objects.create(problem=problem, steps=[f"Step {n}."], source="many")
    first = researcher.get(reverse("solution-list"), {"source": "many"})
    assert len(first.context["page"].object_list) == 50
    html = first.content.decode()
    assert "Page 1 of 2" in html and "source=many&amp;page=2" in html
    second = shown(researcher, "solution-list", {"source": "many", "page": "2"})
    assert len(second) == 10
    assert not second & {row.pk for row in first.context["page"].object_list}
    assert Problem.objects.count() == 2


def lines_of(response) -> list[dict]:
    assert response.status_code == 200 and response.streaming
    return [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]


def test_the_prm800k_export_honours_the_filters(admin, data):
    url = reverse("export-labels")
    every = lines_of(admin.get(url, {"download": "1"}))
    assert len(every) == 2
    kept = lines_of(admin.get(url, {"download": "1", "subject": "Algebra"}))
    assert [line["question"]["problem"] for line in kept] == [data["apples"].text]
    assert (
        lines_of(admin.get(url, {"download": "1", "correct": "ungraded"}))[0]["question"]["problem"]
        == data["triangle"].text
    )
    assert lines_of(admin.get(url, {"download": "1", "correct": "wrong"})) == []

    # The API's export takes the same filters.
    api = admin.get("/api/labels/export/", {"subject": "Geometry"})
    assert [line["question"]["problem"] for line in lines_of(api)] == [data["triangle"].text]


@pytest.mark.parametrize("query", [{}, {"source": "gpt-4"}, {"level": "5"}, {"labeled": "false"}])
def test_the_preview_counts_what_the_download_holds_and_shows_its_first_lines(admin, data, query):
    url = reverse("export-labels")
    preview = admin.get(url, {**query, "preview": "1"})
    assert preview.status_code == 200
    downloaded = b"".join(admin.get(url, {**query, "download": "1"}).streaming_content)
    lines = downloaded.decode().splitlines(keepends=True)
    assert preview.context["preview"].count == len(lines)
    assert preview.context["preview"].lines == lines[:3]
    html = preview.content.decode()
    assert f'data-testid="export-count">{len(lines)}<' in html
    # The preview carries on to the TRL export with the same filters.
    assert reverse("export-stepwise") in html


def test_the_api_lists_take_the_same_filters(researcher, data):
    solutions = researcher.get("/api/solutions/", {"correct": "ungraded"}).json()
    rows = solutions["results"] if isinstance(solutions, dict) else solutions
    assert [row["id"] for row in rows] == [data["ungraded"].pk]
    problems = researcher.get("/api/problems/", {"q": "triangle", "prm_max": "1"}).json()
    rows = problems["results"] if isinstance(problems, dict) else problems
    assert [row["id"] for row in rows] == []
    problems = researcher.get("/api/problems/", {"q": "triangle"}).json()
    rows = problems["results"] if isinstance(problems, dict) else problems
    assert [row["id"] for row in rows] == [data["triangle"].pk]
    refused = researcher.get("/api/solutions/", {"correct": "maybe"})
    assert refused.status_code == 400
    assert "correct" in refused.json()


def test_the_api_schema_documents_every_filter_each_list_and_the_export_take(researcher):
    schema = researcher.get("/api/schema/", {"format": "json"}).json()

    def parameters(path: str) -> dict[str, dict]:
        return {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}

    every = set(names(DataFilters))
    for path in ("/api/problems/", "/api/solutions/", "/api/labels/export/"):
        documented = parameters(path)
        assert every <= set(documented), (path, every - set(documented))
        # With the values the filter accepts.
        assert {"correct", "wrong", "ungraded"} <= set(documented["correct"]["schema"]["enum"])
    assert parameters("/api/solutions/")["prm_min"]["schema"]["type"] == "number"
