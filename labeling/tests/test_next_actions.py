"""What the labeler may do next (`core.rules.next_actions`): computed once, on the server,
and sent with every answer, the API's session state and the page's steps alike."""

import json
import random
import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from rest_framework.test import APIClient

from labeling import selectors
from labeling.models import Problem
from labeling.services import workbench

pytestmark = pytest.mark.django_db

STEPS = ["Eight halves.", "That is 5.", "So it is 5.", "# Answer\n\n5"]
ALTERNATIVES = {"1": ["That is 4.", "Four."]}


@pytest.fixture
def solution(make_solution):
    problem = Problem.objects.create(text="What is $8/2$?", answer="4")
    return make_solution(
        problem, steps=STEPS, answer="5", is_correct=False, alternatives=ALTERNATIVES
    )


@pytest.fixture
def api(solution, make_user):
    client = APIClient()
    client.force_authenticate(make_user("script"))
    return client


def items(actions: dict) -> dict[str, dict]:
    return {item["key"]: item for item in actions["items"]}


def test_the_api_says_what_may_be_rated_next_in_every_state_of_a_label(api):
    served = api.post("/api/sessions/next/").json()["session"]
    sid, actions = served["id"], served["state"]["next_actions"]

    def rate(step, rating, completion_index=0):
        body = {"step": step, "rating": rating, "completion_index": completion_index}
        answer = api.post(f"/api/sessions/{sid}/rate/", body, format="json")
        assert answer.status_code == 200, answer.json()
        return answer.json()["state"]["next_actions"]

    # Nothing rated: the first step, alone, and nothing to submit yet.
    assert actions["ratings"] == [-1, 0, 1]
    assert (actions["next"], actions["active"], actions["outcome"]) == ("s0", "s0", None)
    assert "Rate every step" in actions["submit_refusal"]
    assert [key for key, item in items(actions).items() if item["open"]] == ["s0"]
    assert "not reached yet" in items(actions)["s1"]["reason"]
    # Where the keys go after each rating of a step, for typing ahead.
    assert items(actions)["s1"]["then"] == {"-1": "s1c1", "0": "s2", "1": "s2"}
    actions = rate(0, 1)
    assert items(actions)["s1"]["open"]
    assert "after a -1" in items(actions)["s1c1"]["reason"]

    # A -1 at step 2: the steps after it are closed, its alternatives open, one at a time.
    actions = rate(1, -1)
    by_key = items(actions)
    assert (actions["next"], actions["active"], actions["outcome"]) == ("s1c1", "s1c1", None)
    assert "alternatives" in actions["submit_refusal"]
    for later in ("s2", "s3"):
        assert not by_key[later]["open"]
        assert "step 2 is rated -1" in by_key[later]["reason"]
    assert (by_key["s1"]["alternatives_open"], by_key["s0"]["alternatives_open"]) == (True, False)
    assert by_key["s1c1"]["open"] and not by_key["s1c2"]["open"]
    assert by_key["s1c1"]["back"] == "s1"

    # Every alternative rated: found_error can be submitted; nothing is left to rate.
    rate(1, 1, completion_index=1)
    actions = rate(1, 0, completion_index=2)
    assert (actions["next"], actions["active"], actions["outcome"]) == (None, "s1c2", "found_error")
    assert actions["submit_refusal"] is None

    # The -1 taken back: its alternatives close, the following step opens again.
    actions = rate(1, 0)
    by_key = items(actions)
    assert (actions["next"], actions["outcome"]) == ("s2", None)
    assert by_key["s2"]["open"] and not by_key["s3"]["open"]
    assert not by_key["s1"]["alternatives_open"] and not by_key["s1c1"]["open"]

    # Every step rated: the solution can be submitted.
    rate(2, 1)
    actions = rate(3, 1)
    assert (actions["next"], actions["active"], actions["outcome"]) == (None, "s3", "solution")
    assert all(item["open"] for item in actions["items"] if not item["completion"])


def test_a_minus_one_that_ends_the_label_leaves_no_item_for_keys_typed_ahead(api):
    served = api.post("/api/sessions/next/").json()["session"]
    sid, actions = served["id"], served["state"]["next_actions"]
    # Step 1 has no alternatives: a -1 there ends the label. The page, typing ahead, must know
    # that no key rates anything after it (the -1 is not overwritten by the next key).
    assert items(actions)["s0"]["then"]["-1"] is None
    body = {"step": 0, "rating": -1}
    actions = api.post(f"/api/sessions/{sid}/rate/", body, format="json").json()["state"]
    actions = actions["next_actions"]
    assert (actions["next"], actions["active"], actions["outcome"]) == (None, None, "found_error")
    assert actions["last"] == "s0"
    assert "Backspace" in actions["active_reason"]
    # Changing it stays possible, deliberately: the step is open to a rating naming it.
    assert items(actions)["s0"]["open"]
    body = {"step": 0, "rating": 1}
    actions = api.post(f"/api/sessions/{sid}/rate/", body, format="json").json()["state"]
    assert actions["next_actions"]["active"] == "s1"
    assert actions["next_actions"]["active_reason"] is None


def page_actions(html: str) -> dict:
    found = re.search(r'<script id="next-actions" type="application/json">(.*?)</script>', html)
    assert found, "the steps carry no next actions"
    return json.loads(found.group(1))


def test_the_page_gets_the_same_next_actions_as_the_api(client, api):
    # The page's labeler and the API's are one user: both read the same session.
    client.force_login(User.objects.get(username="script"))
    page = client.get(reverse("label-next"), follow=True)
    sid = page.context["session"].pk
    assert page_actions(page.content.decode())["active"] == "s0"

    def rate(step, rating, seq):
        body = {"step_index": step, "rating": rating, "seq": seq}
        return client.post(reverse("label-rate", args=[sid]), body, HTTP_HX_REQUEST="true")

    rate(0, 1, 1)
    actions = page_actions(rate(1, -1, 2).content.decode())
    assert actions["active"] == "s1c1"
    assert not items(actions)["s2"]["open"]
    assert "step 2 is rated -1" in items(actions)["s2"]["reason"]
    # The API's answer for the same session is the same decision, word for word.
    resumed = api.post("/api/sessions/next/").json()["session"]
    assert resumed["id"] == sid
    assert resumed["state"]["next_actions"] == actions


def test_where_the_page_expects_the_keys_next_is_where_the_server_then_sends_them(
    solution, make_labeler
):
    # The page follows `then` to show where keys typed ahead will land; each answer must then
    # say the same, whichever open item was rated (the next one, or an earlier one), and two
    # presses ahead as well as one.
    labeler = make_labeler("a")
    session = workbench.next_session(labeler=labeler).session
    rng = random.Random(28)
    actions = selectors.session_state(session=session).next_actions
    older, ahead = None, False
    for _ in range(80):
        open_items = [item for item in actions["items"] if item["open"]]
        if actions["active"] is None or rng.random() < 0.3:
            # No key is active after a -1 that ended the label: the labeler goes back to an
            # item deliberately (Backspace, a click), as they may to any open one.
            item = rng.choice(open_items)
        else:
            item = next(i for i in open_items if i["key"] == actions["active"])
        rating = rng.choice([-1, 0, 1])
        workbench.rate_step(
            session_id=session.pk,
            labeler=labeler,
            step_index=item["step"],
            completion_index=item["completion"],
            rating=rating,
        )
        answer = selectors.session_state(session=session).next_actions
        assert answer["active"] == item["then"][str(rating)], (item["key"], rating)
        typed_ahead = item["key"] == actions["active"]
        if older is not None and ahead and typed_ahead:
            # Two presses on the keys' item in a row: the second was aimed, before the first
            # was answered, by the `then` of an item that answer had not yet opened.
            assert items(older)[item["key"]]["then"][str(rating)] == answer["active"]
        older, actions, ahead = actions, answer, typed_ahead


def test_a_rating_names_its_item_as_the_page_does_and_the_old_names_still_answer(api):
    sid = api.post("/api/sessions/next/").json()["session"]["id"]
    url = f"/api/sessions/{sid}/rate/"
    # The names the page posts: step_index and completion_index.
    assert api.post(url, {"step_index": 0, "rating": 1}, format="json").status_code == 200
    # `step`, the API's name before: deprecated, still taken.
    answer = api.post(url, {"step": 1, "rating": -1}, format="json")
    assert answer.status_code == 200
    assert answer.json()["state"]["next_actions"]["active"] == "s1c1"
    both = {"step_index": 1, "step": 1, "completion_index": 1, "rating": 0}
    assert api.post(url, both, format="json").status_code == 200
    # Two names that disagree, or none, are a 400 that says which.
    clash = api.post(url, {"step_index": 1, "step": 2, "rating": 0}, format="json")
    assert clash.status_code == 400 and "step" in clash.json()
    missing = api.post(url, {"rating": 0}, format="json")
    assert missing.status_code == 400 and "step_index" in missing.json()
