"""The chat models a deployment runs: the worker's and the grader's, those `RUBRIC_BOT_ALLOWED_MODELS`
lets a workspace choose, the summarizer's, the audit grader's and the shadow grader's, each loaded
once at start-up.

A bad model string, or a provider package or API key that is missing, is a `ConfigError` that names
its setting and what to do about it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from urllib.parse import unquote, urlsplit

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel

from bot.agent.openai_json import as_json
from bot.config import ConfigError, Settings, problem


@dataclass(frozen=True)
class Provider:
    """A langchain model provider as the bot's error messages and install extras know it."""

    package: str
    """The langchain integration package on PyPI."""
    extra: str | None
    """The rubric-bot extra that installs it (see `install_command`); None: always installed."""
    key: str | None
    """The environment variable holding its API key, if it takes one."""


PROVIDERS: Mapping[str, Provider] = {
    "openai": Provider("langchain-openai", None, "OPENAI_API_KEY"),
    "anthropic": Provider("langchain-anthropic", "anthropic", "ANTHROPIC_API_KEY"),
    "google_genai": Provider("langchain-google-genai", "google", "GOOGLE_API_KEY"),
    "mistralai": Provider("langchain-mistralai", "mistral", "MISTRAL_API_KEY"),
    "groq": Provider("langchain-groq", "groq", "GROQ_API_KEY"),
    "ollama": Provider("langchain-ollama", "ollama", None),
}
"""Providers by their `provider:` prefix in a model string; each extra is declared in pyproject.toml."""


def init_models(settings: Settings) -> tuple[BaseChatModel, BaseChatModel]:
    """The worker and grader chat models; a bad model string or missing provider key is a `ConfigError`.

    Without `RUBRIC_BOT_GRADER_MODEL` the grader is the worker's model (a problem is reported once).
    """
    models = _load_models(_deployment_models(settings), settings.model_timeout)
    worker = models[settings.worker_model or ""]
    return worker, models[settings.grader_model or ""]


def _deployment_models(settings: Settings) -> list[tuple[str, str | None]]:
    """The deployment's worker and grader models, by the setting each comes from."""
    specs = [("RUBRIC_BOT_MODEL", settings.worker_model)]
    if settings.grader_model_override:
        specs.append(("RUBRIC_BOT_GRADER_MODEL", settings.grader_model_override))
    return specs


def init_summary_model(settings: Settings, worker: BaseChatModel) -> BaseChatModel:
    """The model that summarizes long threads: `RUBRIC_BOT_SUMMARY_MODEL`, else the worker's."""
    spec = settings.summary_model_override
    if not spec:
        return worker
    return _load_models([("RUBRIC_BOT_SUMMARY_MODEL", spec)], settings.model_timeout)[spec]


def init_audit_model(settings: Settings) -> BaseChatModel | None:
    """The audit grader's model, `RUBRIC_BOT_AUDIT_MODEL`; None when it is not set (no audit)."""
    return _optional_model(settings, "RUBRIC_BOT_AUDIT_MODEL", settings.audit_model)


def init_shadow_model(settings: Settings) -> BaseChatModel | None:
    """The shadow grader's model, `RUBRIC_BOT_SHADOW_GRADER_MODEL`; None when it is not set."""
    return _optional_model(settings, "RUBRIC_BOT_SHADOW_GRADER_MODEL", settings.shadow_grader_model)


def _optional_model(settings: Settings, setting: str, spec: str | None) -> BaseChatModel | None:
    """The chat model of an optional model setting named `setting`; None when it is not set."""
    if not spec:
        return None
    return _load_models([(setting, spec)], settings.model_timeout)[spec]


def _load_models(specs: Sequence[tuple[str, str | None]], timeout: float) -> dict[str, BaseChatModel]:
    """The chat model of each (setting, model string) in `specs`, by model string (each loaded
    once); every problem together as one `ConfigError`."""
    problems: list[str] = []
    models: dict[str, BaseChatModel] = {}
    for name, spec in specs:
        if spec is None:
            problems.append(problem(name, "is not set"))
            continue
        if spec in models:
            continue
        try:
            # Without a timeout, a provider that accepts a call and never answers holds the thread.
            models[spec] = as_json(init_chat_model(spec, timeout=timeout))
        except Exception as exc:  # provider packages raise many types for a bad name or missing key
            problems.append(model_problem(name, spec, exc))
    if problems:
        raise ConfigError(problems)
    return models


def install_command(extra: str, package: str) -> str:
    """The command that adds the `extra` of this very installation of rubric-bot (a checkout,
    editable or not; the Docker image), as pip recorded where it was installed from; else `package`.

    rubric-bot is installed from its repository, never by name from an index, so ``rubric-bot[…]``
    alone would name nothing pip can find.
    """
    try:
        origin = json.loads(distribution("rubric-bot").read_text("direct_url.json") or "{}")
    except (PackageNotFoundError, ValueError):
        origin = {}
    url = urlsplit(str(origin.get("url", "")))
    if url.scheme != "file" or "dir_info" not in origin:
        return f"pip install {package}"
    checkout = unquote(url.path)
    if origin["dir_info"].get("editable"):
        return f"pip install -e '{checkout}[{extra}]'"
    image = f"docker build --build-arg EXTRAS={extra} ."
    return f"pip install '{checkout}[{extra}]' (for the Docker image: {image})"


def model_problem(name: str, spec: str, exc: Exception) -> str:
    """What to do about model setting `name` (holding `spec`) whose model failed to load with `exc`.

    A missing integration package or API key is named as such, not blamed on the model string.
    """
    provider = PROVIDERS.get(spec.partition(":")[0]) if ":" in spec else None
    if isinstance(exc, ImportError) and provider is not None and provider.extra is not None:
        return (
            f"{name} ({spec}) needs the {provider.package} package, which is not installed: "
            f"{install_command(provider.extra, provider.package)}."
        )
    # Without a prefix langchain guesses the provider; then only a key its error names is blamed.
    keys = [provider.key] if provider is not None else [p.key for p in PROVIDERS.values() if p.key]
    named = [key for key in keys if key and (provider is not None or key in str(exc))]
    missing = next((key for key in named if not os.environ.get(key)), None)
    if missing is not None:
        return f"{missing} is not set: {name} ({spec}) needs it; set it in the environment or .env."
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())
    return problem(name, f"cannot be used ({reason})")


@dataclass(frozen=True)
class ModelPair:
    """The models of a run: the worker's and the grader's, as langchain "provider:model" strings."""

    worker: str
    grader: str


def configured_models(settings: Settings) -> dict[str, BaseChatModel]:
    """Every model a run may use, by model string: the deployment's worker, grader, summarizer and
    escalation grader, and `RUBRIC_BOT_ALLOWED_MODELS`; a bad one is a `ConfigError` naming its setting."""
    specs = _deployment_models(settings)
    specs += [("RUBRIC_BOT_ALLOWED_MODELS", spec) for spec in settings.allowed_models]
    if settings.summary_model_override:
        specs.append(("RUBRIC_BOT_SUMMARY_MODEL", settings.summary_model_override))
    if settings.escalation_model:
        specs.append(("RUBRIC_BOT_ESCALATION_MODEL", settings.escalation_model))
    return _load_models(specs, settings.model_timeout)
