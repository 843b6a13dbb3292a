"""A body with a million ids is refused while it is parsed (core/strictjson.py,
MAX_JSON_ARRAY_ITEMS): a 400 in well under a second that names the limit and echoes no id,
at every endpoint that takes a list of ids or a bulk array."""

import json
import time

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from core import strictjson

MILLION_IDS = list(range(1, 1_000_001))

# Every endpoint whose body carries a list of ids (`grep -rn "solution_ids\|problem_ids"`, and
# the fields named `problems`), or is itself an array (the bulk imports), with that body.
BODIES = {
    "/api/judge-runs/": {"solution_ids": MILLION_IDS},
    "/api/sampling-runs/ problem_ids": {"problem_ids": MILLION_IDS, "samples": 1},
    "/api/sampling-runs/ solution_ids": {
        "purpose": "rollouts",
        "solution_ids": MILLION_IDS,
        "samples": 1,
    },
    "/api/evaluation-sets/": {"name": "held out", "problems": MILLION_IDS},
    "/api/live/generations/": {"problems": MILLION_IDS},
    "/api/problems/": [{"problem": "1+1?", "unique_id": f"p{i}"} for i in range(20_001)],
    "/api/solutions/": [{"unique_id": "u", "steps": [str(i)]} for i in range(20_001)],
}


@pytest.fixture
def admin_api(db, make_user):
    client = APIClient()
    client.force_authenticate(make_user("ada", role="admin"))
    return client


@pytest.mark.parametrize("where", list(BODIES))
def test_a_million_ids_is_refused_while_parsing(admin_api, where):
    path = where.split()[0]
    body = json.dumps(BODIES[where])

    # CPU seconds, not wall time: a busy machine must not fail it. Before, 5 s of CPU.
    started = time.process_time()
    response = admin_api.post(path, body, content_type="application/json")
    took = time.process_time() - started

    assert response.status_code == 400, response.content[:300]
    assert took < 1.0, f"{took:.2f} s"
    assert len(response.content) < 300
    assert b"10,000 items" in response.content and b"MAX_JSON_ARRAY_ITEMS" in response.content
    assert b"123456" not in response.content  # no id echoed


def test_the_parse_stops_at_the_limit_not_the_end():
    text = json.dumps({"ids": [[], MILLION_IDS]})
    started = time.process_time()  # CPU seconds: the parse of 10,001 items, not a million
    with pytest.raises(strictjson.InvalidJSON, match="more than 10,000 items"):
        strictjson.loads(text)
    assert time.process_time() - started < 0.5


@override_settings(MAX_JSON_ARRAY_ITEMS=3)
def test_the_limit_is_the_setting_and_counts_each_array_apart():
    # Nested arrays of 3 each, many commas in all: each array is within the limit.
    assert strictjson.loads('[[1, 2, 3], [4, 5, 6], {"a": "x,y,z,w"}]')[2] == {"a": "x,y,z,w"}
    with pytest.raises(strictjson.InvalidJSON, match="more than 3 items"):
        strictjson.loads("[[1, 2, 3], [4, 5, 6, 7]]")
    # The Python scanner keeps every strict check of the C one.
    for refused in ("[1, 2, NaN, 4]", '[{"a": 1, "a": 2}, 1, 2]', "[1e400, 1, 2]"):
        with pytest.raises(strictjson.InvalidJSON):
            strictjson.loads(refused)


def test_an_id_list_field_takes_its_length_from_the_setting():
    from core.idlists import id_list_field

    with override_settings(MAX_JSON_ARRAY_ITEMS=5):
        field = id_list_field()
    assert field.max_length == 5
