"""Property-based fuzzing of every API operation from the OpenAPI schema, as every role.

Each generated request must be answered without a 5xx, and every response the schema
describes must conform to it. Besides what the schema allows, generated bodies and query
strings carry hostile values (core/strictjson.py and the importers' column checks refuse
them): nesting deeper than the JSON limit, huge numbers, NaN and infinities, NUL, unpaired
surrogates, over-long and blank text, and uploads made of the same.
"""

import json

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from core import strictjson
from core.roles import ROLES
from labeling import tokens
from labeling.demo.seed import create_demo_accounts
from labeling.models import Problem, Solution
from labeling.services import workbench
from labeling.services.labelers import get_or_create_labeler

pytestmark = pytest.mark.django_db


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


# Values swapped into a generated JSON body, which is then sent as text that Python's json
# writes: NaN and Infinity as such, an unpaired surrogate as its escape.
HOSTILE_VALUES = [
    _nested(strictjson.MAX_DEPTH + 1),
    10**4000,
    -(10**39),
    2**63,
    float("nan"),
    float("inf"),
    float("-inf"),
    1e308,
    "\x00",
    "step\x00",
    "\ud800",
    "x" * 100_000,
    "",
    " ",
    True,
    None,
]
# Whole JSON bodies no JSON writer produces.
HOSTILE_BODIES = [
    b"[" * 100_000 + b"]" * 100_000,
    b"9" * 5000,
    b"1e400",
    b"NaN",
    b'{"x": 1, "x": 2}',
    b'"\\u0000"',
]
# Query strings and form fields: text only.
HOSTILE_TEXT = ["\x00", "9" * 5000, "-1", "NaN", "Infinity", "1e400", "x" * 10_000, "", "true"]
HOSTILE_FILES = [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"problem": "1+1?", "answer": "2", "level": ' + b"9" * 5000 + b"}\n",
    b'{"problem": "1+1?", "answer": NaN}\n',
    b'{"problem": "1+1?", "answer": "2", "answer": "3"}\n',
    b'{"problem": "1+1?", "answer": "2", "subject": "' + b"s" * 100 + b'"}\n',
    b'{"problem": "1+1?", "answer": "2", "level": 99999}\n',
    b'{"unique_id": "fuzz/1", "steps": ["x"], "score": 1e400}\n',
    b'{"unique_id": "fuzz/1", "steps": [""], "source": "' + b"m" * 200 + b'"}\n',
    b'{"problem": "a\\u0000b", "answer": "2"}\n',
    b"\xff\xfe not UTF-8\n",
]


def _swap(value, index: int, hostile):
    """`value` with one member (chosen by `index`) replaced by `hostile`; a list's item is a
    bulk body's object, so the swap goes one level into it."""
    if isinstance(value, dict) and value:
        key = sorted(value)[index % len(value)]
        if key == "file":
            hostile = HOSTILE_FILES[index % len(HOSTILE_FILES)]
        return {**value, key: hostile}
    if isinstance(value, list) and value:
        items = list(value)
        items[index % len(items)] = _swap(items[index % len(items)], index // 7, hostile)
        return items
    return hostile


def _duplicate_a_key(body) -> bytes:
    if isinstance(body, dict) and body:
        key = sorted(body)[0]
        return json.dumps(body)[:-1].encode() + f", {json.dumps(key)}: null}}".encode()
    return b'{"x": 1, "x": 2}'


def _make_hostile(case, index: int, value, text: str, raw: bytes):
    kind = index % 4
    if kind == 0 and case.query:
        case.query = _swap(case.query, index // 4, text)
    elif case.media_type == "application/json":
        if kind == 1:
            case.body = raw
        elif kind == 2:
            case.body = _duplicate_a_key(case.body)
        else:
            case.body = json.dumps(_swap(case.body, index // 4, value)).encode()
    elif isinstance(case.body, dict):  # a form or a multipart upload
        case.body = _swap(case.body, index // 4, text)
    return case


def flatmap_case(context, case):
    hostile = st.builds(
        _make_hostile,
        st.just(case),
        st.integers(0, 1000),
        st.sampled_from(HOSTILE_VALUES),
        st.sampled_from(HOSTILE_TEXT),
        st.sampled_from(HOSTILE_BODIES),
    )
    return st.one_of(st.just(case), hostile)


@pytest.fixture
def api_schema():
    schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(public=True))
    schema.app = get_wsgi_application()  # requests go through Django in-process (WSGI)
    schema.hooks.hook(flatmap_case)
    # As Django's test client does: a request must not close the test's database connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield schema
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(params=ROLES)
def role_token(request) -> str:
    """A token of one role, with a problem, a solution and an open session to act on."""
    create_demo_accounts()
    problem = Problem.objects.create(text="What is $2+3$?", answer="5", unique_id="fuzz/1")
    Solution.objects.create(
        problem=problem, steps=["2+3=5.", "# Answer\n\n5"], answer="5", is_correct=True
    )
    user = User.objects.get(username=request.param)
    workbench.next_session(labeler=get_or_create_labeler(user=user))
    return tokens.create_api_token(user=user).token


fuzz = schemathesis.pytest.from_fixture("api_schema")


@fuzz.parametrize()
# A parametrized fixture reaches the test through its closure: schemathesis's wrapper asks for
# it by name, which pytest allows only for fixtures it knew of at collection.
@pytest.mark.usefixtures("role_token")
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_5xx_and_every_answer_fits_the_schema(case, role_token):
    case.call_and_validate(
        headers={"Authorization": f"Token {role_token}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
