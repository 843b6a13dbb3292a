"""Property-based fuzzing of every API operation from the OpenAPI schema: no 500s."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from labeling import tokens
from labeling.demo.seed import create_demo_accounts
from labeling.models import Problem, Solution

pytestmark = pytest.mark.django_db


@pytest.fixture
def api_schema():
    schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(public=True))
    schema.app = get_wsgi_application()  # requests go through Django in-process (WSGI)
    # As Django's test client does: a request must not close the test's database connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield schema
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def admin_token() -> str:
    create_demo_accounts()
    problem = Problem.objects.create(text="What is $2+3$?", answer="5", unique_id="fuzz/1")
    Solution.objects.create(
        problem=problem, steps=["2+3=5.", "# Answer\n\n5"], answer="5", is_correct=True
    )
    from django.contrib.auth.models import User

    return tokens.create_api_token(user=User.objects.get(username="admin")).token


fuzz = schemathesis.pytest.from_fixture("api_schema")


@fuzz.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_500(case, admin_token):
    case.call_and_validate(
        headers={"Authorization": f"Token {admin_token}"}, checks=[not_a_server_error]
    )
