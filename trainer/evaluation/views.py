"""Researcher pages of evaluation: the evaluation sets (register one) and a model version's page
(its figures on every set beside the baselines and the active version's, activation; each
evaluation's progress, cancel and evaluate-again)."""

from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core import job_views
from core.errors import DomainError, http_status
from core.permissions import require_researcher
from trainer import pipeline
from trainer.evaluation import figures, sets, uploads
from trainer.evaluation.forms import EvaluationSetForm
from trainer.evaluation.models import Evaluation
from trainer.models import ModelVersion
from trainer.training import model_versions
from trainer.training.selectors import active_model_version

_require_researcher = partial(
    require_researcher, refusal="Evaluation is for researchers and admins."
)


@login_required
def evaluation_set_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    form = EvaluationSetForm(request.POST or None, request.FILES or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                if data["processbench_file"]:
                    found = uploads.register_uploaded_processbench(
                        name=data["name"], upload=data["processbench_file"], user=request.user
                    )
                else:
                    found = sets.register_held_out_set(
                        name=data["name"], problem_ids=data["held_out_problems"], user=request.user
                    )
                if data["decides_promotion"]:
                    sets.choose_for_promotion(evaluation_set_id=found.pk)
            except DomainError as exc:
                messages.error(request, str(exc))
                status = http_status(exc)
            else:
                messages.success(request, f"Evaluation set {found.name} registered.")
                return redirect("evaluation-set-list")
    return render(
        request,
        "trainer/evaluation_set_list.html",
        {"sets": sets.evaluation_sets(), "form": form},
        status=status,
    )


def version_rows(version: ModelVersion) -> list[dict]:
    """Per evaluation set: the version's evaluation and, per figure, its value, interval and
    baselines beside the active version's value on the same set."""
    active = active_model_version()
    theirs = {}
    if active is not None and active.pk != version.pk:
        theirs = {e.evaluation_set_id: e for e in sets.evaluations_of(model_version=active)}
    rows = []
    for evaluation in sets.evaluations_of(model_version=version):
        found = evaluation.results.get("figures", {})
        other = theirs.get(evaluation.evaluation_set_id)
        rows.append(
            {
                "evaluation": evaluation,
                "results": evaluation.results,
                "figures": [
                    {
                        "name": name,
                        "label": figures.LABELS.get(name, name),
                        **figure,
                        "baselines": [
                            (b.replace("_", " "), v) for b, v in figure["baselines"].items()
                        ],
                        "active": (sets.figure(other, name) or {}).get("value"),
                    }
                    for name, figure in found.items()
                ],
            }
        )
    return rows


@login_required
def model_version_detail(request: HttpRequest, model_version_id: int) -> HttpResponse:
    _require_researcher(request)
    version = ModelVersion.objects.filter(pk=model_version_id).first()
    if version is None:
        raise Http404("No such model version.")
    rows = version_rows(version)
    return render(
        request,
        "trainer/model_version_detail.html",
        {
            "version": version,
            "active": active_model_version(),
            "rows": rows,
            "live": any(row["evaluation"].is_live for row in rows),
            "comparison": model_versions.comparison_with_active(version=version),
            "not_evaluated_on": list(sets.sets_not_evaluated_on(model_version=version)),
        },
    )


def _evaluation(request: HttpRequest, model_version_id: int, evaluation_id: int) -> Evaluation:
    _require_researcher(request)
    found = Evaluation.objects.filter(pk=evaluation_id, model_version_id=model_version_id).first()
    if found is None:
        raise Http404("No such evaluation of this model version.")
    return found


@login_required
@require_POST
def evaluation_cancel(request: HttpRequest, model_version_id: int, evaluation_id: int):
    _evaluation(request, model_version_id, evaluation_id)
    return job_views.cancel(
        request,
        cancel_job=lambda: sets.cancel_evaluation(evaluation_id=evaluation_id),
        stops=sets.STOPS,
        then=reverse("model-version-detail", args=[model_version_id]),
    )


@login_required
@require_POST
def model_version_evaluate(request: HttpRequest, model_version_id: int):
    """Evaluate the version on the sets registered since it was trained."""
    _require_researcher(request)
    if not ModelVersion.objects.filter(pk=model_version_id).exists():
        raise Http404("No such model version.")
    queued = pipeline.queue_evaluations(model_version_id=model_version_id)
    messages.success(
        request,
        f"{queued} evaluation{'' if queued == 1 else 's'} queued."
        if queued
        else "It has an evaluation on every registered set already.",
    )
    return redirect("model-version-detail", model_version_id)


@login_required
@require_POST
def evaluation_again(request: HttpRequest, model_version_id: int, evaluation_id: int):
    _evaluation(request, model_version_id, evaluation_id)
    try:
        pipeline.evaluate_again(evaluation_id=evaluation_id)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Evaluation {evaluation_id} is queued again.")
    return redirect("model-version-detail", model_version_id)
