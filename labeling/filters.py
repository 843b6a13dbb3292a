"""The data filters: one definition of what a researcher narrows problems, solutions and labels
by, for the data pages, the API's list endpoints and both exports (PRM800K here, TRL in the
trainer).

`DataFilters` is a parameter set (core/params.py): its form (`FilterForm`) and the query string
it round-trips through (`from_query` / `to_query`) are derived from it, so a page's URL, an API
call and an export take the same names and refuse a bad value with the same sentence.
"""

from collections.abc import Mapping
from dataclasses import dataclass, fields
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from core.errors import Invalid
from core.params import Params, form_fields, names, param, params_from_form, refused
from labeling import selectors
from labeling.models import PROBLEM_LEVELS, LabelingSession, Problem, Solution

CORRECT = {"correct": "Correct", "wrong": "Wrong", "ungraded": "Ungraded"}
# "true"/"false", as the API's boolean query parameters spell it.
LABELED = {"true": "Labeled", "false": "Not labeled"}


class InvalidFilter(Invalid):
    pass


@dataclass(frozen=True)
class DataFilters(Params):
    invalid = InvalidFilter
    noun = "filter"

    q: str | None = param(None, label="Search", help="Words in the problem text, as shown.")
    subject: str | None = param(None, label="Subject")
    level: int | None = param(None, label="Level", low=PROBLEM_LEVELS[0], high=PROBLEM_LEVELS[1])
    split: str | None = param(None, label="Split")
    generation: int | None = param(None, label="Generation")
    source: str | None = param(None, label="Source model", help="The model that wrote it.")
    correct: str | None = param(None, label="Graded", choices=CORRECT)
    labeled: str | None = param(None, label="Labeled", choices=LABELED)
    prm_min: float | None = param(None, label="PRM score from", low=0, high=1)
    prm_max: float | None = param(None, label="PRM score to", low=0, high=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.q is not None:
            # Checked before any query: each word is a substring scan of every problem.
            if len(self.q) > settings.SEARCH_MAX_CHARS:
                raise refused(
                    InvalidFilter, "q", f"q: at most {settings.SEARCH_MAX_CHARS} characters."
                )
            if len(self.q.split()) > settings.SEARCH_MAX_WORDS:
                raise refused(InvalidFilter, "q", f"q: at most {settings.SEARCH_MAX_WORDS} words.")
        if self.prm_min is not None and self.prm_max is not None and self.prm_min > self.prm_max:
            raise InvalidFilter("The PRM score range is empty: its start is above its end.")

    @property
    def active(self) -> bool:
        return any(getattr(self, name) is not None for name in names(DataFilters))

    @property
    def on_solutions(self) -> bool:
        """Whether a filter is about solutions (a problem is kept for a solution it has)."""
        return any(getattr(self, name) is not None for name in SOLUTION_FILTERS)


PROBLEM_FILTERS = ("q", "subject", "level", "split")
SOLUTION_FILTERS = tuple(n for n in names(DataFilters) if n not in PROBLEM_FILTERS)


class FilterForm(forms.Form):
    """The filters as a GET form: its fields are derived from `DataFilters`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields.update(form_fields(DataFilters))
        self.fields["q"].widget.input_type = "search"
        for name in ("subject", "split", "source"):
            self.fields[name].widget.attrs["list"] = f"seen-{name}"

    @property
    def filter_fields(self) -> list:
        return [self[name] for name in names(DataFilters)]

    def data_filters(self) -> DataFilters | None:
        """The filters, or None with the refusals beside their fields (after `is_valid`)."""
        return params_from_form(self, DataFilters, only=names(DataFilters))


def from_query(query: Mapping[str, str]) -> DataFilters:
    """The filters a query string names (other keys, such as `page`, are left alone);
    InvalidFilter naming the first bad one."""
    form = FilterForm({name: query.get(name, "") for name in names(DataFilters)})
    chosen = form.data_filters() if form.is_valid() else None
    if chosen is None:
        name, errors = next(iter(form.errors.items()))
        field = None if name == "__all__" else name
        raise refused(InvalidFilter, field, f"{name}: {errors[0]}" if field else errors[0])
    return chosen


def to_query(filters: DataFilters, **more) -> str:
    """The query string of the filters that are set (and `more`), for a link that keeps them."""
    pairs = [
        (f.name, getattr(filters, f.name))
        for f in fields(DataFilters)
        if getattr(filters, f.name) is not None
    ]
    pairs += [(key, value) for key, value in more.items() if value is not None]
    return urlencode(pairs)


def carried(query: Mapping[str, str]) -> str:
    """The filters of a query string, as given (checked or not), for a link to another page
    that takes them; the page's own keys (`page`, `preview`, an export's options) stay."""
    return urlencode([(name, query[name]) for name in names(DataFilters) if query.get(name)])


# --- the querysets ---------------------------------------------------------------------------


def _problem_q(filters: DataFilters, prefix: str = "") -> Q:
    q = Q()
    if filters.q:
        # The text as shown, TeX drawn (labeling/shown_text.py): `15%` finds `15\%`, `frac`
        # finds no `\frac`; a trigram index serves it on PostgreSQL.
        for word in filters.q.split():
            q &= Q(**{f"{prefix}shown_text__icontains": word})
    for name in ("subject", "split"):
        if getattr(filters, name) is not None:
            q &= Q(**{f"{prefix}{name}__iexact": getattr(filters, name)})
    if filters.level is not None:
        q &= Q(**{f"{prefix}level": filters.level})
    return q


def _problem_ids(q: Q):
    """The ids of the problems `q` keeps, for a solution filter. On PostgreSQL as a list: the
    planner guesses a substring search keeps 1% of problems, so a common word (half of them)
    got a plan that reads every matching solution and sorts them to show 50; with the ids in
    hand it walks the solutions newest first and stops at 50 (docs/benchmarks.md)."""
    ids = Problem.objects.filter(q).values("pk")
    return list(ids.values_list("pk", flat=True)) if connection.vendor == "postgresql" else ids


def search_solutions(solutions: QuerySet[Solution], *, words: str) -> QuerySet[Solution]:
    """The admin's solution search: each word found in the problem as shown (or its unique
    id) or in the answer. The problems first, through their index, as the data pages do: an
    OR across a join to the problems' raw text read every solution (0.4 s at 100,000)."""
    for word in words.split()[: settings.SEARCH_MAX_WORDS]:
        problem = Q(shown_text__icontains=word) | Q(unique_id__icontains=word)
        solutions = solutions.filter(
            Q(problem_id__in=_problem_ids(problem)) | Q(answer__icontains=word)
        )
    return solutions


def solutions(*, filters: DataFilters) -> QuerySet[Solution]:
    """The solutions every filter keeps."""
    about_problems = _problem_q(filters)
    rows = Solution.objects.all()
    if about_problems:
        rows = rows.filter(problem_id__in=_problem_ids(about_problems))
    if filters.generation is not None:
        rows = rows.filter(generation__number=filters.generation)
    if filters.source is not None:
        rows = rows.filter(source__iexact=filters.source)
    if filters.correct is not None:
        if filters.correct == "ungraded":
            rows = rows.filter(is_correct__isnull=True)
        else:
            rows = rows.filter(is_correct=filters.correct == "correct")
    if filters.labeled is not None:
        done = selectors.has_submitted_label()
        rows = rows.filter(done) if filters.labeled == "true" else rows.exclude(done)
    if filters.prm_min is not None:
        rows = rows.filter(prm_score__gte=filters.prm_min)
    if filters.prm_max is not None:
        rows = rows.filter(prm_score__lte=filters.prm_max)
    return rows


def problems(*, filters: DataFilters) -> QuerySet[Problem]:
    """The problems the problem filters keep that have a solution the solution filters keep
    (any problem, with or without solutions, when none is set)."""
    rows = Problem.objects.filter(_problem_q(filters))
    if filters.on_solutions:
        rows = rows.filter(pk__in=solutions(filters=filters).values("problem_id"))
    # A count per row shown, not a join and group over every solution: the page's count and
    # its 50 rows then read only the problems (issue 44).
    count = (
        Solution.objects.filter(problem=OuterRef("pk"))
        .order_by()
        .values("problem")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return rows.annotate(solution_count=Coalesce(Subquery(count), 0))


def labels(*, filters: DataFilters) -> QuerySet[LabelingSession]:
    """The submitted labels (sessions) of the solutions the filters keep; the generation is the
    label's own (a solution may be labeled again in a later generation)."""
    rows = LabelingSession.objects.filter(submitted_at__isnull=False)
    if filters.generation is not None:
        rows = rows.filter(generation__number=filters.generation)
    by_solution = DataFilters.from_dict({**filters.to_dict(), "generation": None})
    if by_solution.active:
        rows = rows.filter(solution__in=solutions(filters=by_solution).values("pk"))
    return rows


# Suggestions may lag the data by this long: a distinct scan of a million solutions' sources
# is too dear for every page view.
CHOICES_SEEN_SECONDS = 60


def choices_seen() -> dict[str, list]:
    """The values each free-text filter has in the data, for the form's suggestions."""
    return cache.get_or_set("labeling:filter-choices", _choices_seen, CHOICES_SEEN_SECONDS)


def _choices_seen() -> dict[str, list]:
    return {
        "subject": list(
            Problem.objects.exclude(subject="")
            .order_by("subject")
            .values_list("subject", flat=True)
            .distinct()
        ),
        "split": list(
            Problem.objects.exclude(split="")
            .order_by("split")
            .values_list("split", flat=True)
            .distinct()
        ),
        "source": list(
            Solution.objects.exclude(source="")
            .order_by("source")
            .values_list("source", flat=True)
            .distinct()
        ),
    }
