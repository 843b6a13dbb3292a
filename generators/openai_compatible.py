"""A generator that is an OpenAI-compatible chat server (vLLM, SGLang, `transformers serve`).

One chat completion per request, never `n` samples in one: `transformers serve` refuses `n`,
and a per-request seed is what makes sample i reproducible on servers that honour seeds.
Requests go out together, GENERATOR_CONCURRENCY at a time, so a batching server (vLLM)
batches them. Every failure is a GeneratorUnavailable that names the server and the model
and says what went wrong in words of its own: a status code and its meaning, never the text a
server replied (a researcher's URL could point at a service whose reply is a secret). The API
key is never in a message. Where requests may go and with which key: `outbound`.
"""

import errno
import logging
import os
import ssl
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings as django_settings

from generators import outbound
from generators.base import (
    GenerationRequest,
    GeneratorSpec,
    GeneratorUnavailable,
    InvalidGenerator,
    SamplingSettings,
    Usage,
)

logger = logging.getLogger(__name__)

# The client retries refused connections, timeouts, 429 and 5xx with a short backoff.
MAX_RETRIES = 2
DETAIL_CHARS = 300
# What a status says, in our words: the reply's own text is never shown.
STATUS_REASONS = {
    400: "the request was refused",
    401: "the key was refused or is missing",
    403: "the key was refused or is missing",
    404: "no such endpoint or model",
    408: "the request took too long",
    413: "the request was too large",
    422: "the request was refused",
    429: "too many requests",
}
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

        from generators.transport import http_client

        self.spec = spec
        self.usage = Usage()
        # Checked again here, on the worker: a spec can come from anywhere (a stored run, a
        # service called directly), not only through a form.
        self._operator = outbound.is_operator_url(spec.base_url)
        outbound.check_base_url(spec.base_url)
        self._key = outbound.key_for(base_url=spec.base_url, api_key=spec.api_key) or NO_KEY
        timeout = django_settings.GENERATOR_TIMEOUT_SECONDS
        self._client = OpenAI(
            base_url=spec.base_url,
            api_key=self._key,
            timeout=timeout,
            max_retries=MAX_RETRIES,
            http_client=http_client(guarded=not self._operator, timeout=timeout),
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
            done = [future.result() for future in futures]
        finally:
            # After a failure the requests not yet sent are not sent: the call has failed.
            pool.shutdown(wait=True, cancel_futures=True)
        # Counted here, on the caller's thread, and only for a call that succeeded whole.
        for _, tokens in done:
            self.usage.add(tokens=tokens)
        return [text for text, _ in done]

    def close(self) -> None:
        self._client.close()

    def _one(
        self, request: GenerationRequest, sampling: SamplingSettings
    ) -> tuple[str, int | None]:
        """The reply's text and its completion tokens (None when the server reports none)."""
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
        except outbound.OutboundRefused as exc:
            # The transport's check at connection time (the name now resolves elsewhere).
            raise outbound.OutboundRefused(
                f"The generator server at {self.spec.base_url} was not contacted: {exc}"
            ) from None
        except openai.APITimeoutError:
            raise self._unavailable(
                f"did not answer within {django_settings.GENERATOR_TIMEOUT_SECONDS:g} s"
            ) from None
        except openai.APIConnectionError as exc:
            self._log_detail("could not be reached", exc)
            raise self._unavailable(f"cannot be reached ({_connection_reason(exc)})") from None
        except openai.APIStatusError as exc:
            self._log_detail(f"answered HTTP {exc.status_code}", exc)
            raise self._unavailable(
                f"answered HTTP {exc.status_code} ({_status_reason(exc.status_code)})"
            ) from None
        except openai.OpenAIError as exc:
            self._log_detail("gave no chat completion", exc)
            raise self._unavailable("gave a reply that is not a chat completion") from None
        try:
            content = completion.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise self._unavailable("gave a reply with no message text")
        return cut_at_stop(content, request.stop), _completion_tokens(completion)

    def _unavailable(self, what: str) -> GeneratorUnavailable:
        message = f"The generator server at {self.spec.base_url} (model {self.spec.model}) {what}."
        if self._key != NO_KEY:
            message = message.replace(self._key, "***")
        return GeneratorUnavailable(message)

    def _log_detail(self, what: str, exc: Exception) -> None:
        """The reply's text, for the operator's own servers only and only in the worker's
        log: a researcher's URL may point at a service whose reply must not travel."""
        if not self._operator:
            return
        detail = self._detail(exc)
        if self._key != NO_KEY:
            detail = detail.replace(self._key, "***")
        logger.warning("The generator server at %s %s: %s", self.spec.base_url, what, detail)

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


def _completion_tokens(completion) -> int | None:
    tokens = getattr(getattr(completion, "usage", None), "completion_tokens", None)
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


def _status_reason(status: int) -> str:
    if 300 <= status < 400:
        return "a redirect, which is not followed"
    if status >= 500:
        return "a server error"
    return STATUS_REASONS.get(status, "an error")


def _connection_reason(exc: BaseException) -> str:
    """Why a connection failed, in words of ours: the exception's own text may quote what
    the other end sent (a protocol error shows the bytes of an SSH or Redis banner)."""
    import httpx2

    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    for cause in seen:
        if isinstance(cause, ssl.SSLError):
            return "the TLS handshake failed"
    for cause in seen:
        if isinstance(cause, OSError) and cause.errno in errno.errorcode:
            return os.strerror(cause.errno)
    for cause in seen:
        if isinstance(cause, httpx2.RemoteProtocolError):
            return "it did not answer in HTTP"
        if isinstance(cause, httpx2.ConnectError):
            return "the connection failed"
        if isinstance(cause, httpx2.ReadError | httpx2.WriteError):
            return "the connection broke"
    return "the connection failed"
