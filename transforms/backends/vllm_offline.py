"""vLLM's offline batch API (``vllm.LLM``) for a GPU host. Optional: vLLM is not a dependency of
Shiftlab and cannot run on CPU-only machines; install it on the GPU worker (``pip install vllm``).

Prompts, seeds and post-processing are the platform's, exactly as for the HTTP backend: this
class only turns the same ``ChatRequest`` objects into one ``LLM.chat`` batch call.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from transforms.backends.base import BackendError, ChatFailure, ChatRequest, ChatResult, LLMBackend


class VLLMOfflineBackend(LLMBackend):
    def __init__(self, *, alias: str, model: str, engine_options: dict | None = None, **options):
        super().__init__(alias=alias, model=model, **options)
        self.engine_options = engine_options or {}
        self._llm = None

    def _engine(self):
        if self._llm is None:
            try:
                from vllm import LLM  # optional, GPU-only and heavy: imported when the engine is first needed
            except ImportError as exc:
                raise BackendError("the vllm_offline backend needs vLLM on a GPU host: pip install vllm") from exc
            self._llm = LLM(model=self.model, **self.engine_options)
        return self._llm

    def model_identity(self) -> str:
        """The ``identity`` option, else the revision the engine loads (``engine_options["revision"]``);
        "" when neither is set (a local path or a moving branch cannot be told apart)."""
        if self.options.get("identity"):
            return str(self.options["identity"])
        revision = self.engine_options.get("revision")
        return f"revision:{revision}" if revision else ""

    def _generate(
        self, requests: list[ChatRequest], on_result: Callable[[int, ChatResult | ChatFailure], None] | None
    ) -> list[ChatResult | ChatFailure]:
        from vllm import SamplingParams  # optional, GPU-only and heavy: imported only when vLLM is used

        params = [
            SamplingParams(temperature=r.temperature, top_p=r.top_p, max_tokens=r.max_tokens, seed=r.seed)
            for r in requests
        ]
        started = time.perf_counter()
        outputs = self._engine().chat([r.messages for r in requests], sampling_params=params, use_tqdm=False)
        per_request = (time.perf_counter() - started) / len(requests)
        results: list[ChatResult | ChatFailure] = []
        for index, output in enumerate(outputs):
            completion = output.outputs[0]
            result = ChatResult(
                text=completion.text,
                prompt_tokens=len(output.prompt_token_ids or []),
                completion_tokens=len(completion.token_ids or []),
                latency_s=per_request,
                finish_reason=str(completion.finish_reason or ""),
            )
            results.append(result)
            if on_result is not None:
                on_result(index, result)
        return results

    def ping(self) -> str:
        self._engine()
        return f"vLLM offline engine with {self.model}"
