"""Issue 30, point 15: the TRL stepwise-supervision export from the page, narrowed by the data
filters (labeling/filters.py) as the PRM800K export is, previewed before the download; and the
same filters on `manage.py export_stepwise`."""

import json
import re

import pytest
from django.urls import reverse

from labeling.tests.test_math_on_pages import raw_tex
from trainer.tests import test_stepwise_export as stepwise

labeled = stepwise.labeled  # the fixture: one wrong solution, one right, both rated
export = stepwise.export
# The form's boxes ticked as a researcher leaves them (an unticked box is absent: false).
TICKED = {"include_quality_control": "on", "neutral_as_positive": "on"}

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(client, make_user):
    client.force_login(make_user("ada", "admin"))
    return client


def rows_of(response) -> list[dict]:
    assert response.status_code == 200 and response.streaming
    assert response["Content-Disposition"].startswith('attachment; filename="stepwise-')
    return [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]


def test_the_trl_export_page_honours_the_filters(admin, labeled):
    url = reverse("export-stepwise")
    assert admin.get(url).status_code == 200
    every = rows_of(admin.get(url, {**TICKED, "download": "1"}))
    assert [row["prompt"] for row in every] == ["What is $1 + 1$?", "What is $2 + 2$?"]
    wrong = rows_of(admin.get(url, {**TICKED, "download": "1", "correct": "wrong"}))
    assert wrong == [
        {
            "prompt": "What is $1 + 1$?",
            "completions": ["We add.", "One and one make three.", "So it is $3$."],
            "labels": [True, True, False],
        }
    ]
    assert (
        rows_of(admin.get(url, {**TICKED, "download": "1", "q": "2 + 2"}))[0]["labels"]
        == [True] * 3
    )
    assert rows_of(admin.get(url, {**TICKED, "download": "1", "labeled": "false"})) == []
    # The example parameters still apply: a neutral step counts as wrong when asked.
    strict = rows_of(
        admin.get(url, {**TICKED, "download": "1", "correct": "wrong", "neutral_as_positive": ""})
    )
    assert strict[0]["labels"] == [True, False, False]


@pytest.mark.parametrize("query", [{}, {"correct": "correct"}, {"labeled": "false"}])
def test_the_trl_preview_counts_what_the_download_holds(admin, labeled, query):
    url = reverse("export-stepwise")
    preview = admin.get(url, {**query, **TICKED, "preview": "1"})
    assert preview.status_code == 200
    body = b"".join(admin.get(url, {**query, **TICKED, "download": "1"}).streaming_content)
    lines = body.decode().splitlines(keepends=True)
    assert preview.context["preview"].count == len(lines)
    assert preview.context["preview"].lines == lines[:3]
    html = preview.content.decode()
    assert f'data-testid="export-count">{len(lines)}<' in html
    # The problems are shown as math; only the raw lines, folded away, hold TeX.
    shown = re.sub(r'<pre class="jsonl">.*?</pre>', "", html, flags=re.S)
    assert raw_tex(shown) == []


def test_only_admins_export_for_trl(client, make_user, labeled):
    client.force_login(make_user("rita", "researcher"))
    assert client.get(reverse("export-stepwise"), {**TICKED, "download": "1"}).status_code == 403


def test_the_command_takes_the_same_filters(tmp_path, labeled):
    assert [row["prompt"] for row in export(tmp_path, "--correct", "wrong")] == ["What is $1 + 1$?"]
    assert [row["prompt"] for row in export(tmp_path, "--search", "2 + 2")] == ["What is $2 + 2$?"]
