"""Encoders named as in mteb: ``mteb:intfloat/multilingual-e5-small`` (adapter: imports ``mteb``).

mteb describes each model it knows with a ``ModelMeta``: its name, revision, similarity function
and, for models trained with instructions, the prompts mteb prepends per task type and side
(``loader_kwargs["model_prompts"]``, e.g. e5's ``{"query": "query: ", "document": "passage: "}``).
:class:`MtebEncoder` is a sentence-transformers encoder that takes those prompts from the meta and
applies them as mteb does: the prompt is chosen by mteb's order (task type + side, task type,
side; see ``evaluation.encoders.prompt_name_for``) and its text is put in front of every input,
which is what sentence-transformers' ``encode(prompt=...)``, the call mteb makes, does.

The weights come from the ``model`` option (a packaged model, a local folder, or a hub id read
from the hub or its cache); by default the meta's name. Only models mteb loads with its
sentence-transformers wrapper can be run this way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from functools import cached_property

import numpy as np
from django.core.exceptions import ImproperlyConfigured

from evaluation.encoders import EncoderError, SentenceTransformerEncoder

_SENTENCE_TRANSFORMER_LOADERS = ("SentenceTransformerEncoderWrapper", "sentence_transformers_loader")


def mteb_model_meta(name: str):
    """``mteb.get_model_meta(name)`` for a sentence-transformers model, or ``EncoderError``."""
    import mteb  # heavy: only when an mteb model is named

    try:
        meta = mteb.get_model_meta(name)
    except KeyError:
        raise EncoderError(
            f"mteb does not know a model {name!r}: name it as mteb's model registry does "
            "(e.g. mteb:intfloat/multilingual-e5-small), or give the model itself without the mteb: prefix."
        ) from None
    loader = getattr(meta.loader, "__name__", str(meta.loader))
    if loader not in _SENTENCE_TRANSFORMER_LOADERS:
        raise EncoderError(
            f"mteb loads {name} with {loader}, which Shiftlab does not run (it runs sentence-transformers "
            "models only): use a sentence-transformers model."
        )
    return meta


class MtebEncoder(SentenceTransformerEncoder):
    """A sentence-transformers model with the prompts and similarity of its mteb ``ModelMeta``.

    Options: ``mteb_model`` (the name in mteb's registry), ``model_prompts`` (override the meta's:
    for a model mteb lists without them, or for tests) and the options of
    :class:`~evaluation.encoders.SentenceTransformerEncoder` (``model`` defaults to ``mteb_model``).
    """

    def __init__(
        self,
        *,
        alias: str,
        mteb_model: str,
        model: str | None = None,
        model_prompts: Mapping[str, str] | None = None,
        **options,
    ):
        if not isinstance(mteb_model, str) or not mteb_model.strip():
            raise ImproperlyConfigured(
                f"EVALUATION_ENCODERS[{alias!r}]['OPTIONS']['mteb_model'] must name an mteb model."
            )
        super().__init__(alias=alias, model=model or mteb_model, **options)
        self.mteb_model = mteb_model.strip()
        self._prompt_override = dict(model_prompts) if model_prompts is not None else None

    def __repr__(self) -> str:
        return f"<MtebEncoder {self.alias!r} mteb_model={self.mteb_model!r} model={self.model!r}>"

    @cached_property
    def meta(self):
        return mteb_model_meta(self.mteb_model)

    @property
    def model_id(self) -> str:
        return self.meta.name

    @cached_property
    def revision(self) -> str:
        # The prompts change the vectors: the embedding cache must not mix prompted and plain ones.
        prompts = json.dumps(self.prompts, sort_keys=True)
        return hashlib.sha256(f"{super().revision}:mteb:{self.mteb_model}:{prompts}".encode()).hexdigest()

    @property
    def prompts(self) -> Mapping[str, str]:
        """The meta's prompts; as in mteb, they replace the model's own when both exist."""
        if self._prompt_override is not None:
            return self._prompt_override
        declared = (self.meta.loader_kwargs or {}).get("model_prompts")
        return dict(declared) if declared else super().prompts

    @property
    def similarity_fn_name(self) -> str:
        declared = self.meta.similarity_fn_name
        return str(getattr(declared, "value", declared)) if declared else super().similarity_fn_name

    def encode(
        self, texts: Sequence[str], *, batch_size: int | None = None, prompt_name: str | None = None
    ) -> np.ndarray:
        if prompt_name is None:
            return super().encode(texts, batch_size=batch_size)
        if prompt_name not in self.prompts:
            raise EncoderError(
                f"mteb model {self.mteb_model} has no prompt {prompt_name!r} "
                f"(it defines: {', '.join(self.prompts) or 'none'})."
            )
        prompt = self.prompts[prompt_name]
        return super().encode([prompt + text for text in texts], batch_size=batch_size)
