"""Task evaluators that follow the MTEB protocol (pure: numpy, scipy and scikit-learn only).

Each evaluator is a frozen dataclass holding its options (the seed lives here, as in MTEB). Its
``evaluate(..., encode=...)`` turns texts into embeddings through the ``encode`` callable it is
given, so encoding (and caching) stays outside; its ``score(...)`` takes embeddings directly.
Results are frozen dataclasses with ``main_score``, ``main_metric`` and ``metrics()`` (a flat
dict named as MTEB names its scores). ``options`` holds the protocol options a dataset may set
(classification draws, clustering settings) and reads them from an ``mteb`` task.

Reference: MTEB, https://github.com/embeddings-benchmark/mteb (``mteb/_evaluators`` and
``mteb/abstasks``, version 2.26), whose protocols these modules re-implement.
"""

from evaluation.evaluators.base import Encode, EvaluationResult
from evaluation.evaluators.classification import ClassificationEvaluator, ClassificationResult
from evaluation.evaluators.clustering import ClusteringEvaluator, ClusteringResult
from evaluation.evaluators.pair_classification import PairClassificationEvaluator, PairClassificationResult
from evaluation.evaluators.ranking import RankingResult, RerankingEvaluator, RetrievalEvaluator
from evaluation.evaluators.sts import STSEvaluator, STSResult
from evaluation.evaluators.summarization import SummarizationEvaluator, SummarizationResult

__all__ = [
    "ClassificationEvaluator",
    "ClassificationResult",
    "ClusteringEvaluator",
    "ClusteringResult",
    "Encode",
    "EvaluationResult",
    "PairClassificationEvaluator",
    "PairClassificationResult",
    "RankingResult",
    "RerankingEvaluator",
    "RetrievalEvaluator",
    "STSEvaluator",
    "STSResult",
    "SummarizationEvaluator",
    "SummarizationResult",
]
