"""The labeling room's pages: the workbench and live labeling, the labeler's own pages, the
researchers' and admins' pages (labels, quality, agreement, imports, reports), tokens.

Over 500 lines because it holds every page of the room; each view is thin (services and
selectors do the work), grouped by page below.
"""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.functional import SimpleLazyObject
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect, push_url

from core import prm800k
from core.bulk import rare_collections
from core.errors import Invalid, http_status
from core.nostore import no_store
from core.permissions import (
    ADMIN,
    ANNOTATOR,
    RESEARCHER,
    can_manage_labelers,
    can_review_problem_reports,
    can_view_quality,
    has_role,
)
from labeling import (
    agreement,
    first_error,
    judge_display,
    mathtext,
    quality,
    selectors,
    tallies,
    tokens,
)
from labeling.forms import ApiTokenForm, LiveGenerationForm
from labeling.models import FinishReason, Generation, Labeler, LabelingSession
from labeling.services import corrections, live, overlap, reports, workbench
from labeling.services.labelers import get_or_create_labeler

COMPARISONS_PER_PAGE = 20
MY_LABELS_PER_PAGE = 50


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """My progress today, my totals and agreement with gold, and the way in to labeling."""
    context: dict = {"can_label": has_role(request.user, ANNOTATOR, RESEARCHER, ADMIN)}
    labeler = Labeler.objects.filter(user=request.user).first()
    if labeler is not None:
        context["today"] = quality.today_progress(labeler=labeler)
        # Agreement with gold as of midnight: a figure that moved the moment a label was
        # submitted would tell the labeler that label was gold (issue 41, item 11).
        context["me"] = quality.labeler_figures(
            labeler_ids=[labeler.pk], gold_submitted_before=quality.start_of_today()
        )[0]
        context["queue_left"] = selectors.queue_left(labeler=labeler)
        context["queue_left_more"] = context["queue_left"] >= selectors.QUEUE_LEFT_AT_MOST
    if can_view_quality(request.user):
        context.update(selectors.overview())
    return render(request, "labeling/home.html", context)


# --- the annotator's workbench ---------------------------------------------------------------


def _labeler(request: HttpRequest):
    # The labeler and the roles checked below in one query (the labeler's first request
    # creates it).
    labeler = selectors.labeler_with_roles(user=request.user)
    if not has_role(request.user, ANNOTATOR, RESEARCHER, ADMIN):
        raise PermissionDenied("Labeling is for annotators.")
    return labeler or get_or_create_labeler(user=request.user)


@login_required
def label_next(request: HttpRequest) -> HttpResponse:
    """Serve (or resume) a labeling session and open it."""
    served = workbench.next_session(labeler=_labeler(request))
    if served is None:
        return render(request, "labeling/nothing_to_label.html")
    return redirect("label-session", session_id=served.session.pk)


# How each rating is shown and typed: CSS class and button text (colour, icon and words, so no
# meaning rests on colour), and the keys that give it. Keyed by the ratings of prm800k.RATINGS.
_RATING_LOOK = {
    -1: ("bad", "✗ -1 bad", "1-"),
    0: ("ok", "○ 0 okay", "20"),
    1: ("good", "✓ +1 good", "3+="),
}
# (rating, CSS class, button text), in the domain's order.
RATING_BUTTONS = tuple((rating, *_RATING_LOOK[rating][:2]) for rating in prm800k.RATINGS)
# Key -> rating, for the pages' keyboard (data-rating-keys): the pages hold no rating of their own.
RATING_KEYS = json.dumps(
    {key: rating for rating in prm800k.RATINGS for key in _RATING_LOOK[rating][2]}
)


def _workbench_context(
    session: LabelingSession,
    *,
    seq: int | None = None,
    labeler: Labeler | None = None,
    confirmation: str = "",
    new: bool = False,
) -> dict:
    """What the workbench shows; `labeler` for the whole page (its queue count), not for
    a rating's answer, which re-renders the steps alone; `new`: a session served just now."""
    state = selectors.session_state(session=session, new=new)
    queue_left = (
        None
        if labeler is None
        else selectors.queue_left(labeler=labeler, besides=session.solution_id)
    )
    return {
        "queue_left": queue_left,
        # Counted up to a cap (see selectors.queue_left): "100+" past it.
        "queue_left_more": queue_left is not None and queue_left >= selectors.QUEUE_LEFT_AT_MOST,
        # A word that the last solution was saved, shown above the next one.
        "confirmation": confirmation,
        "session": session,
        # Reversed once: the page's rating queue posts here, and a rating re-renders the steps.
        "rate_url": reverse("label-rate", args=[session.pk]),
        # Read only where the template shows it: a rating's answer (the steps) does not.
        "problem": SimpleLazyObject(lambda: session.solution.problem),
        "steps": state.items,
        "current": state.current.key if state.current else None,
        "outcome": state.outcome,
        "total_steps": state.total_steps,
        "choices": RATING_BUTTONS,
        "rating_keys": RATING_KEYS,
        # What the labeler may do next: workbench.js acts on this and applies no rule itself.
        "next_actions": state.next_actions,
        # The labeler's own step in place of the -1 one, once its alternatives are rated.
        "error_step": state.error_step,
        "can_write_human_completion": state.can_write_human_completion,
        "human_completion": state.human_completion,
        "human_completion_url": reverse("label-human-completion", args=[session.pk]),
        # What the labeler sees of the judge (labeling.judge_display): hidden, revealed, confirm.
        "judge_display": state.judge_display,
        # The page's sequence number of the rating this render answers (see workbench.js).
        "seq": seq,
    }


def _int(request: HttpRequest, name: str, default: str | None = None) -> int:
    """A whole number from the form; without a default, one the request must name."""
    value = request.POST.get(name, default)
    if value is None:
        raise Invalid(f"{name} is required.")
    try:
        return int(value)
    except ValueError:
        raise Invalid(f"{name} must be a whole number.") from None


@login_required
def label_session(request: HttpRequest, session_id: int) -> HttpResponse:
    labeler = _labeler(request)
    # Another labeler's session is as missing as one that does not exist: the answer does
    # not tell which ids exist.
    session = get_object_or_404(
        LabelingSession.objects.select_related("solution__problem"), pk=session_id, labeler=labeler
    )
    if not session.accepts_ratings:
        return redirect("label-next")
    if session.queue == "live":
        return render(request, "labeling/live.html", _live_context(session, labeler=labeler))
    # A reopened label (a correction) shows no queue count: the queue did not serve it.
    served = None if session.is_being_corrected else labeler
    return render(request, "labeling/workbench.html", _workbench_context(session, labeler=served))


@login_required
@require_POST
def rate(request: HttpRequest, session_id: int) -> HttpResponse:
    # A rating names its item: never "the active one", which the page may show stale.
    session = workbench.rate_step(
        session_id=session_id,
        labeler=_labeler(request),
        step_index=_int(request, "step_index"),
        rating=_int(request, "rating"),
        flagged=request.POST.get("flagged") in ("1", "on", "true"),
        completion_index=_int(request, "completion_index", "0"),
    )
    seq = _int(request, "seq") if "seq" in request.POST else None
    return render(request, "labeling/_steps.html", _workbench_context(session, seq=seq))


@login_required
@require_POST
def submit(request: HttpRequest, session_id: int) -> HttpResponse:
    labeler = _labeler(request)
    finish_reason = request.POST.get("finish_reason", "")
    session = workbench.submit_session(
        session_id=session_id,
        labeler=labeler,
        finish_reason=finish_reason,
        finish_reason_text=request.POST.get("reason", ""),
    )
    if getattr(session, "was_correction", False):
        # Back to the label as corrected, not on to the queue (it was not served from it).
        messages.success(request, "Saved: your corrected label replaces the one you submitted.")
        back = reverse("my-label", args=[session.pk])
        return HttpResponseClientRedirect(back) if request.htmx else redirect(back)
    return _next_solution(request, labeler, confirmation=SUBMITTED[finish_reason])


# What the labeler is told once a session ends, by how it ended.
SUBMITTED = {
    FinishReason.SOLUTION: "Submitted: your label is saved.",
    FinishReason.FOUND_ERROR: "Submitted: your label, ending at its -1 step, is saved.",
    FinishReason.GIVE_UP: "Given up: saved with your reason.",
    FinishReason.BAD_PROBLEM: (
        "Reported: you will not be served this problem again, and a reviewer will read your reason."
    ),
}


@login_required
@require_POST
def skip(request: HttpRequest, session_id: int) -> HttpResponse:
    """Leave the solution to other labelers, no reason asked and no label kept."""
    labeler = _labeler(request)
    workbench.skip_session(session_id=session_id, labeler=labeler)
    return _next_solution(
        request, labeler, confirmation="Skipped: the solution goes to other labelers."
    )


def _next_solution(request: HttpRequest, labeler: Labeler, *, confirmation: str) -> HttpResponse:
    if not request.htmx:
        messages.success(request, confirmation)
        return redirect("label-next")
    # Prefetch: the next session is served now and comes back in this response, swapped in
    # without a page load. Unopened, it is an ordinary session whose lease runs out.
    served = workbench.next_session(labeler=labeler)
    if served is None:
        response = render(
            request, "labeling/_nothing_to_label.html", {"confirmation": confirmation}
        )
        return push_url(response, reverse("label-next"))
    session = served.session  # with its solution and problem
    if session.queue == "live":
        session = LabelingSession.objects.select_related("solution__problem").get(pk=session.pk)
        context = _live_context(session, confirmation=confirmation, labeler=labeler)
        response = render(request, "labeling/_live.html", context)
        return push_url(response, reverse("label-session", args=[session.pk]))
    context = _workbench_context(
        session, labeler=labeler, confirmation=confirmation, new=served.is_new
    )
    response = render(request, "labeling/_workbench.html", context)
    return push_url(response, reverse("label-session", args=[session.pk]))


@login_required
def my_labels(request: HttpRequest) -> HttpResponse:
    """The labeler's submitted labels, newest first, each with the way to correct it or why
    it is no longer corrected."""
    labeler = _labeler(request)
    page = Paginator(selectors.my_labels(labeler=labeler), MY_LABELS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    rows = [(label, corrections.refusal(label, settled=label.settled)) for label in page]
    return render(request, "labeling/my_labels.html", {"page": page, "rows": rows})


@login_required
def my_label(request: HttpRequest, session_id: int) -> HttpResponse:
    """One of the labeler's submitted labels as they gave it, with the way to correct it or
    why it is no longer corrected."""
    session = get_object_or_404(selectors.my_labels(labeler=_labeler(request)), pk=session_id)
    state = selectors.session_state(session=session)
    context = {
        "session": session,
        "refusal": corrections.refusal(session, settled=session.settled),
        # Read only where the template shows it: a rating's answer (the steps) does not.
        "problem": SimpleLazyObject(lambda: session.solution.problem),
        "steps": state.items,
        "human_completion": state.human_completion,
        "error_step": state.error_step,
    }
    return render(request, "labeling/my_label.html", context)


@login_required
@require_POST
def correct_label(request: HttpRequest, session_id: int) -> HttpResponse:
    """Reopen one of the labeler's submitted labels in the workbench, to correct it."""
    try:
        corrections.reopen_label(session_id=session_id, labeler=_labeler(request))
    except workbench.NotYourSession:
        raise
    except workbench.LabelingRefused as refused:
        messages.error(request, f"Not reopened: {refused}")
        return redirect("my-label", session_id=session_id)
    return redirect("label-session", session_id=session_id)


@login_required
@require_POST
def cancel_correction(request: HttpRequest, session_id: int) -> HttpResponse:
    """Leave a correction unsaved: the label is as it was submitted."""
    corrections.cancel_correction(session_id=session_id, labeler=_labeler(request))
    messages.success(request, "Correction cancelled: your label is as you submitted it.")
    back = reverse("my-label", args=[session_id])
    return HttpResponseClientRedirect(back) if request.htmx else redirect(back)


@login_required
@require_POST
def renew(request: HttpRequest, session_id: int) -> HttpResponse:
    workbench.renew_lease(session_id=session_id, labeler=_labeler(request))
    return HttpResponse(status=204)


# --- quality control and guidelines ----------------------------------------------------------


@no_store  # names who is behind each labeler UUID, for admins
@login_required
def quality_dashboard(request: HttpRequest) -> HttpResponse:
    if not can_view_quality(request.user):
        raise PermissionDenied("The quality page is for researchers and admins.")
    # The labels' tallies compared once for every figure; the figures build a few hundred
    # thousand short-lived objects, which the cycle collector would otherwise walk again and
    # again (a sixth of the page's time at 100,000 labels).
    with tallies.refreshed(), rare_collections():
        overlapping = agreement.overlapping_labels()
        units = agreement.units_by_solution(overlapping)
        between = agreement.peer_agreement_by_labeler(overlapping, units)
        context = {
            "labelers": [
                (figures, between.get(figures.labeler_id)) for figures in quality.labeler_figures()
            ],
            "by_generation": agreement.agreement_by_generation(overlapping, units),
            "first_error": first_error.report(overlapping),
            "with_judge": judge_display.agreement_by_display(),
            "can_manage": can_manage_labelers(request.user),
        }
    return render(request, "labeling/quality.html", context)


@login_required
def labeler_disagreements(request: HttpRequest) -> HttpResponse:
    """Solutions labeled by several labelers, their labels side by side, disagreements first."""
    if not can_view_quality(request.user):
        raise PermissionDenied("The quality page is for researchers and admins.")
    generation = None
    if request.GET.get("generation", "").isdigit():
        generation = get_object_or_404(Generation, pk=int(request.GET["generation"]))
    rows = agreement.comparisons(generation=generation)
    page = Paginator(rows, COMPARISONS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "generation": generation,
        "page": page,
        "comparisons": agreement.comparison_page([solution_id for solution_id, _ in page]),
        "disagreeing": sum(disagree for _, disagree in rows),
        "total": len(rows),
    }
    return render(request, "labeling/labeler_disagreements.html", context)


@login_required
@require_POST
def adjudicate(request: HttpRequest, solution_id: int) -> HttpResponse:
    """Settle on one of the solution's labels for training (an empty choice: on none)."""
    if not can_view_quality(request.user):
        raise PermissionDenied("Only researchers and admins settle labels.")
    choice = request.POST.get("session", "")
    if choice and not choice.isdigit():
        raise Invalid("session must be a session id or empty.")
    overlap.adjudicate(
        solution_id=solution_id, session_id=int(choice) if choice else None, by=request.user
    )
    messages.success(
        request,
        f"Solution {solution_id}: training uses "
        + (f"session {choice}'s label." if choice else "the rule's label again."),
    )
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("labeler-disagreement-list")
    return redirect(back)


@login_required
@require_POST
def labeler_active(request: HttpRequest, labeler_uuid: str) -> HttpResponse:
    if not can_manage_labelers(request.user):
        raise PermissionDenied("Only admins can deactivate labelers.")
    labeler = get_object_or_404(Labeler.objects.select_related("user"), uuid=labeler_uuid)
    active = request.POST.get("active") == "1"
    try:
        quality.set_labeler_active(labeler=labeler, active=active, by=request.user)
    except quality.QualityRefused as exc:
        messages.error(request, str(exc))
    else:
        done = "reactivated" if active else "deactivated"
        messages.success(request, f"Labeler {labeler.uuid} {done}.")
    return redirect("quality")


@login_required
def guidelines(request: HttpRequest) -> HttpResponse:
    return render(request, "labeling/guidelines.html", {"guideline": quality.current_guideline()})


@no_store
@login_required
def api_token_page(request: HttpRequest) -> HttpResponse:
    """Create and revoke my API tokens; a new token is shown once, here, and never again."""
    new_token, status = None, 200
    if request.method == "POST":
        if "revoke" in request.POST:
            tokens.revoke_api_token(user=request.user, token_key=request.POST["revoke"])
            return redirect("api-token-page")
        form = ApiTokenForm(request.POST)
        if form.is_valid():
            try:
                new_token = tokens.create_api_token(
                    user=request.user, expires_in_days=form.cleaned_data["expires_in_days"]
                )
                form = ApiTokenForm()
            except tokens.TooManyTokens as exc:  # shown on the form, beside the list to revoke
                form.add_error(None, str(exc))
                status = http_status(exc)
    else:
        form = ApiTokenForm()
    listed = tokens.api_tokens(user=request.user)
    return render(
        request,
        "labeling/api_tokens.html",
        {
            "form": form,
            "new_token": new_token,
            "tokens": listed,
            "unlisted": tokens.live_token_count(user=request.user) - len(listed),
        },
        status=status,
    )


# --- bad-problem reports ---------------------------------------------------------------------


@login_required
def problem_reports(request: HttpRequest) -> HttpResponse:
    """Open bad-problem reports per problem; researchers read, admins review."""
    if not can_view_quality(request.user):
        raise PermissionDenied("Problem reports are for researchers and admins.")
    context = {
        "problems": reports.open_reports(),
        "can_review": can_review_problem_reports(request.user),
    }
    return render(request, "labeling/reports.html", context)


def _review(request: HttpRequest, problem_id: int, *, confirm: bool) -> HttpResponse:
    if not can_review_problem_reports(request.user):
        raise PermissionDenied("Only admins can confirm or dismiss reports.")
    review = reports.confirm_report if confirm else reports.dismiss_report
    try:
        closed = review(problem_id=problem_id, by=request.user)
    except reports.ReportRefused as exc:
        messages.error(request, str(exc))
    else:
        done = "confirmed: it is marked bad" if confirm else "dismissed"
        messages.success(request, f"{closed} report(s) on problem {problem_id} {done}.")
    return redirect("problem-reports")


@login_required
@require_POST
def problem_report_confirm(request: HttpRequest, problem_id: int) -> HttpResponse:
    return _review(request, problem_id, confirm=True)


@login_required
@require_POST
def problem_report_dismiss(request: HttpRequest, problem_id: int) -> HttpResponse:
    return _review(request, problem_id, confirm=False)


@login_required
@require_POST
def math_preview(request: HttpRequest) -> HttpResponse:
    """The typed text as a step shows it, math rendered: the preview while writing a step."""
    text = request.POST.get("text", "")
    if len(text) > workbench.HUMAN_COMPLETION_MAX_CHARS:
        # A preview of more would be of a step that cannot be saved.
        raise Invalid(
            f"A written step has at most {workbench.HUMAN_COMPLETION_MAX_CHARS:,} characters."
        )
    return HttpResponse(mathtext.render_step(text))


@login_required
@require_POST
def human_completion(request: HttpRequest, session_id: int) -> HttpResponse:
    """Save or remove the labeler's own correct step in place of the -1 step."""
    text = "" if "remove" in request.POST else request.POST.get("text", "")
    if "remove" not in request.POST and not text.strip():
        raise Invalid("Write the correct step first (or choose Remove).")
    session = workbench.write_human_completion(
        session_id=session_id,
        labeler=_labeler(request),
        step_index=_int(request, "step_index"),
        text=text,
    )
    return render(request, "labeling/_steps.html", _workbench_context(session))


# --- phase-1 live labeling (labeling.services.live) ------------------------------------------


def _live_context(
    session: LabelingSession, *, confirmation: str = "", labeler: Labeler | None = None
) -> dict:
    """What the live page shows; `labeler` for the whole page (its queue count), not for the
    steps part that each action re-renders."""
    return {
        "queue_left": None if labeler is None else live.problems_left(labeler=labeler),
        "session": session,
        "problem": session.solution.problem,
        "state": live.live_state(session=session),
        "choices": RATING_BUTTONS,
        "rating_keys": RATING_KEYS,
        "confirmation": confirmation,
    }


def _live_step(request: HttpRequest, session: LabelingSession) -> HttpResponse:
    """The steps part again, or the next session once this one ended."""
    if not session.is_open:
        return _next_solution(
            request, _labeler(request), confirmation="Submitted: your trajectory is saved."
        )
    session = LabelingSession.objects.select_related("solution__problem", "generation").get(
        pk=session.pk
    )
    return render(request, "labeling/_live_steps.html", _live_context(session))


@login_required
def live_steps(request: HttpRequest, session_id: int) -> HttpResponse:
    """The trajectory and the current step (polled while the proposals are on their way)."""
    session = get_object_or_404(
        LabelingSession.objects.select_related("solution__problem", "generation"),
        pk=session_id,
        labeler=_labeler(request),
    )
    return render(request, "labeling/_live_steps.html", _live_context(session))


@login_required
@require_POST
def live_rate(request: HttpRequest, session_id: int) -> HttpResponse:
    session = live.rate_proposal(
        session_id=session_id,
        labeler=_labeler(request),
        step_index=_int(request, "step_index"),
        completion_index=_int(request, "completion_index"),
        rating=_int(request, "rating"),
        flagged=request.POST.get("flagged") in ("1", "on", "true"),
    )
    return _live_step(request, session)


@login_required
@require_POST
def live_choose(request: HttpRequest, session_id: int) -> HttpResponse:
    session = live.choose_proposal(
        session_id=session_id,
        labeler=_labeler(request),
        step_index=_int(request, "step_index"),
        completion_index=_int(request, "completion_index"),
    )
    return _live_step(request, session)


@login_required
@require_POST
def live_write(request: HttpRequest, session_id: int) -> HttpResponse:
    session = live.write_step(
        session_id=session_id,
        labeler=_labeler(request),
        step_index=_int(request, "step_index"),
        text=request.POST.get("text", ""),
    )
    return _live_step(request, session)


@login_required
@require_POST
def live_retry(request: HttpRequest, session_id: int) -> HttpResponse:
    session = live.retry_proposals(
        session_id=session_id, labeler=_labeler(request), step_index=_int(request, "step_index")
    )
    return _live_step(request, session)


@login_required
@require_POST
def live_stop(request: HttpRequest, session_id: int) -> HttpResponse:
    session = live.stop_waiting(
        session_id=session_id, labeler=_labeler(request), step_index=_int(request, "step_index")
    )
    return _live_step(request, session)


@login_required
@require_POST
def live_finish(request: HttpRequest, session_id: int) -> HttpResponse:
    labeler = _labeler(request)
    live.finish_live(
        session_id=session_id,
        labeler=labeler,
        finish_reason=request.POST.get("finish_reason", ""),
        finish_reason_text=request.POST.get("reason", ""),
    )
    return _next_solution(request, labeler, confirmation="Submitted: your trajectory is saved.")


@login_required
def live_generation_new(request: HttpRequest) -> HttpResponse:
    """Researchers and admins open a live (phase-1) generation."""
    if not can_view_quality(request.user):
        raise PermissionDenied("Live generations are opened by researchers and admins.")
    form = LiveGenerationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        generation = live.create_live_generation(user=request.user, **form.service_arguments())
        messages.success(request, f"Live generation {generation.number} is open for labeling.")
        return redirect("live-generation-new")
    status = 400 if request.method == "POST" else 200
    return render(request, "labeling/live_new.html", {"form": form}, status=status)
