"""API tokens per person are capped (API_TOKENS_PER_USER, labeling/tokens.py): the one past
the cap is a 409 from the API and the page, and the lists show at most the cap."""

import pytest
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from labeling import tokens


@pytest.mark.django_db
@override_settings(API_TOKENS_PER_USER=5)
def test_the_token_past_the_cap_is_refused_by_the_api_and_the_list_holds_the_cap(make_user):
    client = APIClient()
    client.force_authenticate(make_user("tess"))

    made = [client.post(reverse("api-tokens"), {}, format="json") for _ in range(5)]
    refused = client.post(reverse("api-tokens"), {}, format="json")

    assert [r.status_code for r in made] == [201] * 5
    assert refused.status_code == 409
    assert "API_TOKENS_PER_USER" in refused.json()["detail"]
    assert len(client.get(reverse("api-tokens")).json()) == 5


@pytest.mark.django_db
def test_120_tokens_in_a_row_stop_at_the_default_cap(client, make_user):
    user = make_user("tess")
    client.force_login(user)

    statuses = [
        client.post(reverse("api-token-page"), {"expires_in_days": ""}).status_code
        for _ in range(120)
    ]

    assert statuses[:20] == [200] * 20 and set(statuses[20:]) == {409}
    page = client.get(reverse("api-token-page"))
    assert page.content.count(b'name="revoke"') == 20
    assert tokens.live_token_count(user=user) == 20


@pytest.mark.django_db
@override_settings(API_TOKENS_PER_USER=2)
def test_a_revoked_or_expired_token_frees_its_place(make_user):
    from datetime import timedelta

    from django.utils import timezone
    from knox.models import AuthToken

    user = make_user("tess")
    first = tokens.create_api_token(user=user)
    tokens.create_api_token(user=user)
    with pytest.raises(tokens.TooManyTokens):
        tokens.create_api_token(user=user)

    assert tokens.revoke_api_token(user=user, token_key=first.token_key)
    third = tokens.create_api_token(user=user)
    AuthToken.objects.filter(token_key=third.token_key).update(
        expiry=timezone.now() - timedelta(seconds=1)
    )
    tokens.create_api_token(user=user)  # the expired one no longer counts
    assert tokens.live_token_count(user=user) == 2
