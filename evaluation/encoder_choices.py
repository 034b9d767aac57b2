"""The embedding models this deployment can run, in words a researcher reads (issue 31).

The benchmark and baseline pages offer them in a picker, and a run checks its models here before
it starts, so a model the server cannot load is refused at once, in plain words, instead of
failing every unit later. Runnable are: the aliases configured in ``EVALUATION_ENCODERS``, the
models packaged with Shiftlab, models already in the local Hugging Face cache, a local model
folder, and, only where this server may download from the Hugging Face hub (``HF_HUB_OFFLINE``
unset), any model the hub knows. Only the hub check uses the network.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from huggingface_hub import constants as hub_constants
from huggingface_hub import model_info, scan_cache_dir, snapshot_download
from huggingface_hub.errors import CacheNotFound, RepositoryNotFoundError

from evaluation.encoders import MTEB_MODEL_PREFIX, PACKAGED_MODELS

HUB_CHECK_SECONDS = 10
NO_ENCODERS = (
    "No embedding model is set up on this server, so nothing can be benchmarked yet. An administrator "
    "sets models up (the SHIFTLAB_ENCODER_MODEL and SHIFTLAB_ENCODERS settings, see the deployment guide)."
)


@dataclass(frozen=True)
class ModelChoice:
    """A model a run may name: ``name`` (what the run stores) and ``label`` (what people read)."""

    name: str
    label: str


def hub_downloads_allowed() -> bool:
    """Whether this server may fetch models from the Hugging Face hub (``HF_HUB_OFFLINE`` unset)."""
    return not hub_constants.HF_HUB_OFFLINE


def model_label(name: str) -> str:
    """``name`` with the model behind it when it is a configured alias: "default (all-MiniLM-L6-v2)"."""
    config = settings.EVALUATION_ENCODERS.get(name)
    model = (config or {}).get("OPTIONS", {}).get("model") or (config or {}).get("OPTIONS", {}).get("base")
    return f"{name} ({model})" if model and model != name else name


def model_choices() -> list[ModelChoice]:
    """Configured aliases first (in settings order), then packaged models, then cached hub models;
    each model once (a packaged or cached model that an alias already runs is left out)."""
    choices = [
        ModelChoice(alias, f"{model_label(alias)}: set up on this server") for alias in settings.EVALUATION_ENCODERS
    ]
    if "default" not in settings.EVALUATION_ENCODERS:
        return choices  # other models are encoded with the default alias's backend
    taken = {c.name for c in choices} | {_configured_model(alias) for alias in settings.EVALUATION_ENCODERS}
    packaged_ids = set()
    for name, (model_id, package) in PACKAGED_MODELS.items():
        if model_id in packaged_ids or importlib.util.find_spec(package) is None:
            continue
        packaged_ids.add(model_id)
        if name not in taken and model_id not in taken:
            choices.append(ModelChoice(name, f"{name}: comes with Shiftlab"))
    for repo_id in _cached_hub_models():
        if repo_id not in taken and repo_id not in packaged_ids:
            choices.append(ModelChoice(repo_id, f"{repo_id}: downloaded before"))
    return choices


def model_problem(name: str) -> str | None:
    """Why ``name`` cannot run on this server, in plain words with what to do; None if it can."""
    encoders = settings.EVALUATION_ENCODERS
    if not encoders:
        return NO_ENCODERS
    if name in encoders:
        return None
    if name in PACKAGED_MODELS and importlib.util.find_spec(PACKAGED_MODELS[name][1]) is not None:
        return None
    if "default" not in encoders:
        return (
            f"Model {name!r} is not one of the models set up on this server ({', '.join(encoders)}): pick one of them."
        )
    if name.startswith(MTEB_MODEL_PREFIX) or Path(name).expanduser().is_dir() or _in_hub_cache(name):
        return None
    listed = ", ".join(choice.name for choice in model_choices())
    if not hub_downloads_allowed():
        return (
            f"Model {name!r} is not available on this server: it is not one of its models ({listed}), and this "
            "server does not download models from the Hugging Face hub. Pick one of the listed models, or ask "
            "the administrator to add this one."
        )
    try:
        model_info(name, timeout=HUB_CHECK_SECONDS)
    except RepositoryNotFoundError:
        return (
            f"There is no model {name!r} on the Hugging Face hub (or it is private): check the spelling, "
            "e.g. sentence-transformers/all-MiniLM-L6-v2, or pick one of this server's models "
            f"({listed})."
        )
    except Exception as exc:  # network errors are many unrelated types
        return (
            f"The Hugging Face hub could not be asked whether model {name!r} exists ({_reason(exc)}): try again "
            f"later, or pick one of this server's models ({listed})."
        )
    return None


def _configured_model(alias: str) -> str:
    return str(settings.EVALUATION_ENCODERS[alias].get("OPTIONS", {}).get("model") or "")


_CACHE_LISTING_SECONDS = 30.0
_cache_listing: tuple[float, list[str]] | None = None


def _cached_hub_models() -> list[str]:
    """The model repos in the local Hugging Face cache. Scanning it stats every file there, and the
    benchmarks page (which renders the picker) is refetched every 2 s while a run goes on, so the
    listing is kept for 30 s: a model downloaded meanwhile shows within that."""
    global _cache_listing
    now = time.monotonic()
    if _cache_listing is None or now - _cache_listing[0] > _CACHE_LISTING_SECONDS:
        try:
            cache = scan_cache_dir()
        except (CacheNotFound, OSError):
            repos = []
        else:
            repos = sorted(repo.repo_id for repo in cache.repos if repo.repo_type == "model")
        _cache_listing = (now, repos)
    return list(_cache_listing[1])


def _in_hub_cache(name: str) -> bool:
    try:
        snapshot_download(repo_id=name, local_files_only=True)
    except Exception:  # not cached, or not a valid hub id
        return False
    return True


def _reason(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text[:200] or "no answer"
