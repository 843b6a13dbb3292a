"""The answer-review page (/answers/review/): researchers and admins decide the final answers
the grader left ungraded, one at a time, with keys e (equal), n (not equal) and s (skip).

Thin: the queue is `selectors.answer_review_queue`, a decision `answer_review.decide_answer`.
The ids skipped in this visit travel in the query string (bounded), so a skipped solution
stays in the queue for the next visit and for everyone else.
"""

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.nostore import no_store
from core.permissions import can_view_quality
from labeling import selectors
from labeling.models import AnswerReview
from labeling.services import answer_review


def _skipped(raw: str) -> list[int]:
    """The ids skipped in this visit, from "3,8,12": unknown parts dropped, the latest kept."""
    ids = [int(part) for part in raw.split(",") if part.isdigit()]
    return ids[-selectors.ANSWER_REVIEW_SKIPPED_MAX :]


def _page(skipped: list[int]) -> str:
    url = reverse("answer-review")
    return f"{url}?{urlencode({'skipped': ','.join(map(str, skipped))})}" if skipped else url


def _allowed(request: HttpRequest) -> None:
    if not can_view_quality(request.user):
        raise PermissionDenied("Answer review is for researchers and admins.")


@no_store
@login_required
def answer_review_page(request: HttpRequest) -> HttpResponse:
    _allowed(request)
    skipped = _skipped(request.GET.get("skipped", ""))
    queue = selectors.answer_review_queue(skipped=skipped)
    solution = queue.first()
    context = {
        "solution": solution,
        "waiting": selectors.answer_review_queue().count(),
        "skipped": ",".join(map(str, skipped)),
        "skipped_count": len(skipped),
        "skip_url": _page([*skipped, solution.pk]) if solution else None,
        "again_url": reverse("answer-review"),
        "verdicts": AnswerReview.Verdict,
    }
    return render(request, "labeling/answer_review.html", context)


@login_required
@require_POST
def answer_review_decide(request: HttpRequest, solution_id: int) -> HttpResponse:
    _allowed(request)
    skipped = _skipped(request.POST.get("skipped", ""))
    try:
        review = answer_review.decide_answer(
            solution_id=solution_id, user=request.user, verdict=request.POST.get("verdict", "")
        )
    except answer_review.AnswerAlreadyDecided as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Solution {solution_id}: {review.get_verdict_display().lower()}."
        )
    return redirect(_page(skipped))
