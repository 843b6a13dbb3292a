"""A generator that is an OpenAI-compatible chat server (vLLM, SGLang, `transformers serve`).

One chat completion per request, never `n` samples in one: `transformers serve` refuses `n`,
and a per-request seed is what makes sample i reproducible on servers that honour seeds.
Requests go out together, GENERATOR_CONCURRENCY at a time, so a batching server (vLLM)
batches them. Every failure is a GeneratorUnavailable that names the server and the model;
the API key is never in a message.
"""

from concurrent.futures import ThreadPoolExecutor

from django.conf import settings as django_settings

from trainer.generators.base import (
    GenerationRequest,
    GeneratorSpec,
    GeneratorUnavailable,
    InvalidGenerator,
    SamplingSettings,
)

# The client retries refused connections, timeouts, 429 and 5xx with a short backoff.
MAX_RETRIES = 2
DETAIL_CHARS = 300
# vLLM's convention for a server that checks no key; the client refuses an empty one.
NO_KEY = "EMPTY"


def cut_at_stop(text: str, stop: tuple[str, ...]) -> str:
    """The text up to the first stop string, as OpenAI's API returns it (some servers,
    `transformers serve` among them, keep the stop string)."""
    ends = [text.find(s) for s in stop if s and s in text]
    return text[: min(ends)] if ends else text


class OpenAICompatibleGenerator:
    def __init__(self, spec: GeneratorSpec):
        if spec.backend != "openai" or not spec.base_url:
            raise InvalidGenerator("An openai generator needs base_url, e.g. http://host:8000/v1.")
        from openai import OpenAI

        self.spec = spec
        self._key = django_settings.GENERATOR_API_KEY or NO_KEY
        self._client = OpenAI(
            base_url=spec.base_url,
            api_key=self._key,
            timeout=django_settings.GENERATOR_TIMEOUT_SECONDS,
            max_retries=MAX_RETRIES,
        )

    def generate(
        self, *, requests: list[GenerationRequest], settings: SamplingSettings
    ) -> list[str]:
        if not requests:
            return []
        workers = max(1, min(django_settings.GENERATOR_CONCURRENCY, len(requests)))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="generator")
        futures = [pool.submit(self._one, request, settings) for request in requests]
        try:
            return [future.result() for future in futures]
        finally:
            # After a failure the requests not yet sent are not sent: the call has failed.
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        self._client.close()

    def _one(self, request: GenerationRequest, sampling: SamplingSettings) -> str:
        import openai

        options = {
            "model": self.spec.model,
            "messages": [dict(message) for message in request.messages],
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": request.max_tokens or sampling.max_tokens,
            "seed": request.seed,
        }
        if request.stop:
            options["stop"] = list(request.stop)
        try:
            completion = self._client.chat.completions.create(**options)
        except openai.APITimeoutError:
            raise self._unavailable(
                f"did not answer within {django_settings.GENERATOR_TIMEOUT_SECONDS:g} s"
            ) from None
        except openai.APIConnectionError as exc:
            raise self._unavailable(f"cannot be reached ({self._detail(exc)})") from None
        except openai.APIStatusError as exc:
            raise self._unavailable(
                f"answered HTTP {exc.status_code}: {self._detail(exc)}"
            ) from None
        except openai.OpenAIError as exc:
            raise self._unavailable(
                f"gave a reply that is not a chat completion ({exc!r})"
            ) from None
        try:
            content = completion.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise self._unavailable("gave a reply with no message text")
        return cut_at_stop(content, request.stop)

    def _unavailable(self, what: str) -> GeneratorUnavailable:
        message = f"The generator server at {self.spec.base_url} (model {self.spec.model}) {what}."
        if self._key != NO_KEY:
            message = message.replace(self._key, "***")
        return GeneratorUnavailable(message)

    @staticmethod
    def _detail(exc: Exception) -> str:
        body = getattr(exc, "body", None)
        if isinstance(body, dict):
            body = body.get("detail") or body.get("message") or body.get("error") or body
        detail = str(body or getattr(exc, "message", "") or exc)
        cause = exc.__cause__
        if cause is not None and str(cause) not in detail:
            detail = f"{detail}: {cause}"
        detail = " ".join(detail.split())
        return detail if len(detail) <= DETAIL_CHARS else detail[: DETAIL_CHARS - 1] + "…"
