"""A labeler corrects a label they submitted, until it is used (issue 30: Label Studio and
Argilla allow an edit until the annotation is used or reviewed).

Reopening does not make a second editor: the label opens in the workbench again
(`workbench.rate_step`, `write_human_completion` and `submit_session` accept a reopened
label), under the same labeling rules. A reopened label still counts as submitted: it keeps
its place among the solution's `labels_wanted`, so nobody else is served the solution for it,
and `Solution.labels_submitted` does not change. What it was is kept: `reopen_label` stores the
submitted version in `extra["corrections"]`; `cancel_correction` puts it back; saving the
correction stamps `edited_at` and keeps the version it replaced in that history.

Quality control stays blind after the fact (issue 41, item 11): a quality-control or
screening label is corrected like any other, so the labels list, a label's page and a
correction's answer are the same for it as for the labeler's other labels. Agreement with
gold reads it as first submitted (`labeling.quality.gold_agreement_by_labeler`): a second try
after seeing one's agreement would measure nothing.

A label is "used", and no longer corrected, once any of these holds (`refusal` says which):
- it was built live (phase 1), step by step with the generator;
- it reported the problem bad (the report is with the reviewers);
- a reviewer settled on a label of its solution (`adjudicated_at` on it or on another label of
  the same solution: the reviewer compared them as they were);
- a model version was trained on it (`used_at`, stamped by `mark_used` when a training run
  that read human labels records its model version). A run reads a label being corrected as
  it was submitted (`trainer.training.dataset`), and a correction saved after the run read
  its data is not frozen: what a run reads is what it used.
An export is not a use: it reads whatever is there when it runs.
"""

from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from labeling.models import FinishReason, Labeler, LabelingSession, StepLabel, StepRating
from labeling.services.sessions import LabelingRefused, locked_session


def refusal(session: LabelingSession, *, settled: bool | None = None) -> str | None:
    """Why the labeler may not correct this submitted label now; None: they may.

    `settled`: whether a label of its solution was chosen by a reviewer (read here when not
    given; `labeling.selectors.my_labels` reads it with the list)."""
    if not session.is_submitted:
        return "This label is not submitted yet: finish it in the workbench."
    if session.queue == "live":
        return "A live label was built step by step with the generator: it is not reopened."
    if session.finish_reason == FinishReason.BAD_PROBLEM:
        return "Your report of a bad problem is with the reviewers: it is not reopened."
    if settled is None:
        settled = is_settled(session)
    if settled:
        return "A reviewer settled on a label of this solution: the labels stay as reviewed."
    if session.used_at is not None:
        return (
            f"A model was trained on this label ({session.used_at:%Y-%m-%d %H:%M} UTC): it "
            "stays as it was used."
        )
    return None


def is_settled(session: LabelingSession) -> bool:
    return LabelingSession.objects.filter(
        solution=session.solution_id, adjudicated_at__isnull=False
    ).exists()


def reopen_label(
    *, session_id: int, labeler: Labeler, now: datetime | None = None
) -> LabelingSession:
    """Reopen the labeler's submitted label in the workbench, keeping the version submitted.
    Reopening one already reopened changes nothing."""
    now = now or timezone.now()
    with transaction.atomic():
        session = locked_session(session_id=session_id, labeler=labeler)
        if session.is_being_corrected:
            return session
        refused = refusal(session)
        if refused:
            raise LabelingRefused(refused)
        history = list((session.extra or {}).get("corrections", []))
        history.append({"reopened_at": now.isoformat(), "previous": _version(session)})
        session.extra = {**(session.extra or {}), "corrections": history}
        session.reopened_at = now
        # Time on task counts from here, not from the submission (sessions.touch).
        session.last_activity_at = now
        session.save(update_fields=["extra", "reopened_at", "last_activity_at"])
    return session


def cancel_correction(
    *, session_id: int, labeler: Labeler, now: datetime | None = None
) -> LabelingSession:
    """Put the label back as it was submitted, and close it again."""
    with transaction.atomic():
        session = locked_session(session_id=session_id, labeler=labeler)
        if not session.is_being_corrected:
            return session
        history = list(session.extra.get("corrections", []))
        previous = history.pop()["previous"] if history else None
        if previous is not None:
            _restore(session, previous)
        extra = {**session.extra, "corrections": history}
        if not history:
            extra.pop("corrections")
        session.extra = extra
        session.reopened_at = None
        session.save(update_fields=["extra", "reopened_at", "finish_reason", "finish_reason_text"])
    return session


def finish_correction(
    session: LabelingSession, *, finish_reason: str, finish_reason_text: str, now: datetime
) -> None:
    """Save the correction (the caller, `workbench.submit_session`, has checked the rules and
    holds the row): the label is submitted as corrected, its submission time kept."""
    if finish_reason == FinishReason.BAD_PROBLEM:
        raise LabelingRefused(
            "A correction cannot report the problem: cancel it, and report the problem when "
            "it is served to you again."
        )
    refused = refusal(session)
    if refused:
        raise LabelingRefused(refused + " Cancel the correction to keep it as it was.")
    history = list(session.extra.get("corrections", []))
    if history:
        history[-1] = {**history[-1], "saved_at": now.isoformat()}
    session.extra = {**session.extra, "corrections": history}
    session.finish_reason = finish_reason
    session.finish_reason_text = finish_reason_text
    session.reopened_at = None
    session.edited_at = now


def mark_used(*, submitted_up_to: datetime, now: datetime | None = None) -> int:
    """A model version was trained on the labels submitted up to `submitted_up_to` (a training
    run's snapshot), as they were then: they are no longer corrected. A label whose correction
    was saved after the snapshot is not frozen in its new form, which no run read (the version
    the run read is in its history). Returns how many were marked."""
    now = now or timezone.now()
    return (
        LabelingSession.objects.filter(submitted_at__lte=submitted_up_to, used_at__isnull=True)
        .filter(Q(edited_at__isnull=True) | Q(edited_at__lte=submitted_up_to))
        .update(used_at=now)
    )


def _version(session: LabelingSession) -> dict:
    """The label as stored now: its ending and every step's rows, enough to put it back."""
    steps = []
    for step in StepLabel.objects.filter(session=session).prefetch_related("ratings"):
        steps.append(
            {
                "index": step.index,
                "chosen_completion": step.chosen_completion,
                "human_completion": step.human_completion,
                "extra": step.extra,
                "ratings": [
                    {
                        "completion_index": rating.completion_index,
                        "text": rating.text,
                        "rating": rating.rating,
                        "flagged": rating.flagged,
                        "extra": rating.extra,
                        # What was shown of the judge with it (labeling.judge_display).
                        "judge_display": rating.judge_display,
                        "judge_rating": rating.judge_rating,
                        "judge_run_id": rating.judge_run_id,
                    }
                    for rating in step.ratings.all()
                ],
            }
        )
    return {
        "finish_reason": session.finish_reason,
        "finish_reason_text": session.finish_reason_text,
        "steps": steps,
    }


def _restore(session: LabelingSession, version: dict) -> None:
    StepLabel.objects.filter(session=session).delete()
    for step in version["steps"]:
        label = StepLabel.objects.create(
            session=session,
            index=step["index"],
            chosen_completion=step["chosen_completion"],
            human_completion=step["human_completion"],
            extra=step["extra"] or {},
        )
        StepRating.objects.bulk_create(
            StepRating(step=label, **{**rating, "extra": rating["extra"] or {}})
            for rating in step["ratings"]
        )
    session.finish_reason = version["finish_reason"]
    session.finish_reason_text = version["finish_reason_text"]
