"""What every generator is: a spec that names it, settings that shape its samples, one call.

A generator turns chat requests into texts. Two backends implement it: an OpenAI-compatible
server (`openai_compatible`) and a local Hugging Face checkpoint on the worker (`local`). The
spec and the settings are recorded with everything a generator makes (a sampling run, a
live proposal, a rollout label), so any sample can be traced to the model and settings that
made it; the API key never is.

This module imports no torch: the web process reads it to check a form.
"""

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from django.conf import settings

from core.errors import Invalid, Unavailable
from core.params import Params, param

BACKENDS = ("openai", "local")


class InvalidGenerator(Invalid):
    """A generator spec or sampling setting that is unknown, of the wrong type or out of range."""


class GeneratorUnavailable(Unavailable):
    """The generator cannot answer (server down, model missing, a request that failed)."""


@dataclass(frozen=True)
class SamplingSettings(Params):
    """How samples are drawn. Sample i of a request uses seed `seed + i`, so a resumed or
    repeated run asks for the same samples again.

    The one definition of the sampling settings: the sampling run's form, the live-labeling
    form, their API fields and `manage.py sample`'s options come from it. The defaults are a
    whole solution's; live labeling's are PROPOSAL_SETTINGS (`generators`)."""

    invalid = InvalidGenerator
    noun = "sampling setting"

    temperature: float = param(0.7, label="Temperature", low=0, high=2)
    top_p: float = param(
        0.95,
        label="Top-p",
        help="Nucleus sampling: only the likeliest tokens whose probabilities add up to this.",
        low=0.01,
        high=1,
    )
    max_tokens: int = param(
        512, label="Max tokens", help="Most tokens in one reply.", low=1, high=32768
    )
    seed: int = param(
        0, label="Seed", help="Sample i is drawn with seed + i.", low=0, high=2**31 - 1
    )


@dataclass(frozen=True)
class GeneratorChoice(Params):
    """The generator a request names: the fields the forms, the API's `generator` object and
    `manage.py sample` take. `spec` is the one rule for which generator that is."""

    invalid = InvalidGenerator
    noun = "generator key"

    backend: str | None = param(
        None,
        label="Backend",
        help="openai: an OpenAI-compatible server at the base URL; local: a local model on the "
        "worker. Empty: openai when a base URL is given, else local.",
        choices={"openai": "OpenAI-compatible server", "local": "Local model"},
    )
    model: str | None = param(
        None,
        label="Model",
        help="The served model, or a local model's name; empty: the configured generator "
        "(GENERATOR_MODEL, GENERATOR_BASE_URL).",
    )
    base_url: str | None = param(
        None, label="Base URL", help="An OpenAI-compatible server, e.g. http://host:8000/v1."
    )

    @classmethod
    def from_dict(cls, values, **kwargs) -> "GeneratorChoice":
        if isinstance(values, dict) and "api_key" in values:
            raise InvalidGenerator(
                "The API key is not part of the generator: give it as api_key beside it "
                "(it is used for this request and never stored)."
            )
        return super().from_dict(values, **kwargs)

    def spec(self) -> "GeneratorSpec":
        """The one rule: the configured generator when the request names none (no model, no
        backend, no base URL); else the one it names, which needs a model."""
        if not (self.model or self.backend or self.base_url):
            return GeneratorSpec.from_settings()
        if not self.model:
            raise InvalidGenerator(
                "Name the model too, or leave backend and base URL empty for the configured "
                "generator."
            )
        return GeneratorSpec.named(self)


@dataclass(frozen=True)
class GeneratorSpec:
    """Which generator: `openai` (a server at `base_url` serving `model`) or `local` (the
    LocalModel named `model`, loaded on the worker).

    `api_key` is the key a researcher gave for this request, for their own server: held in
    memory for the request only, never in `to_dict` (what is stored) nor in the repr (what a
    log or a traceback prints). Which key a request carries is `outbound.key_for`'s rule."""

    backend: str
    model: str
    base_url: str = ""
    api_key: str = field(default="", repr=False, compare=False)

    def to_dict(self) -> dict[str, str]:
        return {"backend": self.backend, "model": self.model, "base_url": self.base_url}

    def with_api_key(self, api_key: str) -> "GeneratorSpec":
        return replace(self, api_key=api_key)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "GeneratorSpec":
        """A generator stored with what it made, or named in a request, checked."""
        return cls.named(GeneratorChoice.from_dict(data))

    @classmethod
    def named(cls, choice: GeneratorChoice) -> "GeneratorSpec":
        backend = choice.backend or ("openai" if choice.base_url else "local")
        model, base_url = choice.model or "", choice.base_url or ""
        if not model or len(model) > 255:
            raise InvalidGenerator("model must name the served model or a local model.")
        if len(base_url) > 1024:
            raise InvalidGenerator("base_url must be a URL of at most 1024 characters.")
        if backend == "openai":
            if not base_url:
                raise InvalidGenerator(
                    "An openai generator needs base_url, e.g. http://host:8000/v1."
                )
            from generators import outbound

            outbound.check_syntax(base_url)
        if backend == "local" and base_url:
            raise InvalidGenerator("A local generator takes no base_url.")
        return cls(backend=backend, model=model, base_url=base_url.rstrip("/"))

    @classmethod
    def requested(cls, data: dict[str, Any] | None, *, api_key: str = "") -> "GeneratorSpec":
        """The generator a person asks for (`GeneratorChoice`'s fields; none named: the
        configured one) with the key they gave for it: what the forms, the API and
        `manage.py sample` build. A URL that is not the operator's is checked in full here
        (generators.outbound: its host resolved, every address checked). Raises
        InvalidGenerator naming what is wrong."""
        from generators import outbound

        spec = GeneratorChoice.from_dict(data).spec()
        outbound.check_api_key(api_key)
        if spec.backend == "local" and api_key:
            raise InvalidGenerator("A local generator takes no api_key.")
        if spec.backend == "openai":
            outbound.check_base_url(spec.base_url)
        return spec.with_api_key(api_key)

    @classmethod
    def from_settings(cls) -> "GeneratorSpec":
        """The configured generator (GENERATOR_BASE_URL, GENERATOR_MODEL); without one, the
        newest local model that generates text (a causal language model the install recorded,
        as `make models-smollm2` does), so that the forms' defaults sample (issue 43, item 9)."""
        if not settings.GENERATOR_MODEL:
            from generators.models import LocalModel

            recorded = (
                LocalModel.objects.filter(architecture__endswith="ForCausalLM")
                .order_by("-created_at", "-pk")
                .values_list("name", flat=True)
                .first()
            )
            if recorded:
                return cls.from_dict({"backend": "local", "model": recorded, "base_url": ""})
            raise InvalidGenerator(
                "No generator is configured and no local model is recorded: set "
                "GENERATOR_MODEL (and GENERATOR_BASE_URL for a server), record a local model "
                "(manage.py convert_gguf, or the admin), or name one in the request."
            )
        backend = "openai" if settings.GENERATOR_BASE_URL else "local"
        return cls.from_dict(
            {
                "backend": backend,
                "model": settings.GENERATOR_MODEL,
                "base_url": settings.GENERATOR_BASE_URL,
            }
        )

    @property
    def source(self) -> str:
        """What a solution it wrote records as its source model."""
        return self.model[:128]


@dataclass(frozen=True)
class GenerationRequest:
    """One sample to draw: chat messages, its seed, and optionally a shorter token budget."""

    messages: tuple[dict[str, str], ...]
    seed: int
    max_tokens: int | None = None
    stop: tuple[str, ...] = field(default=())


@dataclass
class Usage:
    """What generation has cost: `calls` (one per request, i.e. one chat completion drawn),
    the `completion_tokens` the backend reported for them, and `unreported`, the calls whose
    tokens it did not report (a server that sends no `usage`), so a total is never silently
    short."""

    calls: int = 0
    completion_tokens: int = 0
    unreported: int = 0

    def add(self, *, tokens: int | None) -> None:
        """One call more, with its completion tokens (None: not reported)."""
        self.calls += 1
        if tokens is None:
            self.unreported += 1
        else:
            self.completion_tokens += tokens

    def copy(self) -> "Usage":
        return replace(self)

    def since(self, before: "Usage") -> "Usage":
        """What was spent after `before` (a copy taken then)."""
        return Usage(
            calls=self.calls - before.calls,
            completion_tokens=self.completion_tokens - before.completion_tokens,
            unreported=self.unreported - before.unreported,
        )

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            calls=self.calls + other.calls,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            unreported=self.unreported + other.unreported,
        )


class Generator(Protocol):
    spec: GeneratorSpec
    # What it has spent since it was opened (both backends keep it; `Metered` reads it).
    usage: Usage

    def generate(
        self, *, requests: list[GenerationRequest], settings: SamplingSettings
    ) -> list[str]:
        """One text per request, in order (the assistant's reply only). Raises
        GeneratorUnavailable when the backend cannot answer."""
        ...

    def close(self) -> None:
        """Free what the generator holds (connections, a loaded model)."""
        ...
