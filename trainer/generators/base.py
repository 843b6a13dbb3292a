"""What every generator is: a spec that names it, settings that shape its samples, one call.

A generator turns chat requests into texts. Two backends implement it: an OpenAI-compatible
server (`openai_compatible`) and a local Hugging Face checkpoint on the worker (`local`). The
spec and the settings are recorded with everything a generator makes (a sampling run, a
live proposal, a rollout label), so any sample can be traced to the model and settings that
made it; the API key never is.

This module imports no torch: the web process reads it to check a form.
"""

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from django.conf import settings

from annotate.errors import Invalid, Unavailable

BACKENDS = ("openai", "local")


class InvalidGenerator(Invalid):
    """A generator spec or sampling setting that is unknown, of the wrong type or out of range."""


class GeneratorUnavailable(Unavailable):
    """The generator cannot answer (server down, model missing, a request that failed)."""


def _number(data: dict, key: str, default: float, *, low: float, high: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidGenerator(f"{key} must be a number from {low} to {high}.")
    if not low <= value <= high:
        raise InvalidGenerator(f"{key} must be from {low} to {high}, not {value}.")
    return float(value)


def _integer(data: dict, key: str, default: int, *, low: int, high: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidGenerator(f"{key} must be a whole number from {low} to {high}.")
    if not low <= value <= high:
        raise InvalidGenerator(f"{key} must be from {low} to {high}, not {value}.")
    return value


@dataclass(frozen=True)
class SamplingSettings:
    """How samples are drawn. Sample i of a request uses seed `seed + i`, so a resumed or
    repeated run asks for the same samples again."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 512
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "SamplingSettings":
        data = data or {}
        if not isinstance(data, dict):
            raise InvalidGenerator("Sampling settings are an object.")
        unknown = sorted(set(data) - {"temperature", "top_p", "max_tokens", "seed"})
        if unknown:
            raise InvalidGenerator(f"Unknown sampling setting: {', '.join(unknown)}.")
        return cls(
            temperature=_number(data, "temperature", cls.temperature, low=0, high=2),
            top_p=_number(data, "top_p", cls.top_p, low=0.01, high=1),
            max_tokens=_integer(data, "max_tokens", cls.max_tokens, low=1, high=32768),
            seed=_integer(data, "seed", cls.seed, low=0, high=2**31 - 1),
        )


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
        if not isinstance(data, dict):
            raise InvalidGenerator("A generator is an object with backend and model.")
        if "api_key" in data:
            raise InvalidGenerator(
                "The API key is not part of the generator: give it as api_key beside it "
                "(it is used for this request and never stored)."
            )
        unknown = sorted(set(data) - {"backend", "model", "base_url"})
        if unknown:
            raise InvalidGenerator(f"Unknown generator key: {', '.join(unknown)}.")
        backend, model = data.get("backend"), data.get("model")
        base_url = data.get("base_url") or ""
        if backend not in BACKENDS:
            raise InvalidGenerator(f"backend must be one of {', '.join(BACKENDS)}.")
        if not isinstance(model, str) or not model.strip() or len(model) > 255:
            raise InvalidGenerator("model must name the served model or a local model.")
        if not isinstance(base_url, str) or len(base_url) > 1024:
            raise InvalidGenerator("base_url must be a URL of at most 1024 characters.")
        if backend == "openai":
            if not base_url:
                raise InvalidGenerator(
                    "An openai generator needs base_url, e.g. http://host:8000/v1."
                )
            from trainer.generators import outbound

            outbound.check_syntax(base_url)
        if backend == "local" and base_url:
            raise InvalidGenerator("A local generator takes no base_url.")
        return cls(backend=backend, model=model.strip(), base_url=base_url.rstrip("/"))

    @classmethod
    def requested(cls, data: dict[str, Any] | None, *, api_key: str = "") -> "GeneratorSpec":
        """The generator a person asks for (None: the configured one) with the key they gave
        for it: what the forms, the API and `manage.py sample` build. A URL that is not the
        operator's is checked in full here (trainer.generators.outbound: its host resolved,
        every address checked). Raises InvalidGenerator naming what is wrong."""
        from trainer.generators import outbound

        spec = cls.from_settings() if data is None else cls.from_dict(data)
        outbound.check_api_key(api_key)
        if spec.backend == "local" and api_key:
            raise InvalidGenerator("A local generator takes no api_key.")
        if spec.backend == "openai":
            outbound.check_base_url(spec.base_url)
        return spec.with_api_key(api_key)

    @classmethod
    def from_settings(cls) -> "GeneratorSpec":
        """The configured generator (GENERATOR_BASE_URL, GENERATOR_MODEL)."""
        if not settings.GENERATOR_MODEL:
            raise InvalidGenerator(
                "No generator is configured: set GENERATOR_MODEL (and GENERATOR_BASE_URL for "
                "a server), or name one in the request."
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


class Generator(Protocol):
    spec: GeneratorSpec

    def generate(
        self, *, requests: list[GenerationRequest], settings: SamplingSettings
    ) -> list[str]:
        """One text per request, in order (the assistant's reply only). Raises
        GeneratorUnavailable when the backend cannot answer."""
        ...

    def close(self) -> None:
        """Free what the generator holds (connections, a loaded model)."""
        ...
