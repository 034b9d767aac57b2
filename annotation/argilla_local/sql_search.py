"""An argilla-server search engine answered from the server's own SQL database.

argilla-server 2.8 keeps every record, response, suggestion and vector in its database and mirrors
them into Elasticsearch (or OpenSearch) only to search, sort and count. This engine skips the
mirror: writes are no-ops and every read is a query on the database the server already uses
(SQLite or PostgreSQL). Importing this module registers it as ``shiftlab-sql``; the server picks it
with ``ARGILLA_SEARCH_ENGINE=shiftlab-sql``.

Two rules keep it correct under many annotators:

* Reads run on the session of the request that asked (``async_object_session`` of the dataset or
  metadata property passed in). Opening a session per search exhausted the connection pool.
* Queries select plain columns, never whole ``Record`` objects. The request later loads the found
  records with only the current user's responses; a ``Record`` already in the session's identity
  map with all responses loaded would hand other annotators' answers to that user.

Costs are linear in the dataset (no inverted index): fine for validation studies of a few thousand
records, not for the corpora Elasticsearch serves in production. Runs only in ``.venv-argilla``.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from argilla_server.enums import (
    MetadataPropertyType,
    RecordSortField,
    ResponseStatusFilter,
    SimilarityOrder,
    SortOrder,
)
from argilla_server.errors.future import UnprocessableEntityError
from argilla_server.models import (
    Dataset,
    MetadataProperty,
    Question,
    Record,
    Response,
    Suggestion,
    User,
    Vector,
    VectorSettings,
)
from argilla_server.search_engine import (
    AndFilter,
    Filter,
    FloatMetadataMetrics,
    IntegerMetadataMetrics,
    MetadataFilterScope,
    MetadataMetrics,
    Order,
    RangeFilter,
    RecordFilterScope,
    ResponseFilterScope,
    SearchEngine,
    SearchResponseItem,
    SearchResponses,
    SuggestionFilterScope,
    TermsFilter,
    TermsMetrics,
    TextQuery,
)
from sqlalchemy import ColumnElement, DateTime, and_, exists, false, func, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession, async_object_session

ENGINE_NAME = "shiftlab-sql"

_RECORD_COLUMNS = {
    RecordSortField.id: Record.id,
    RecordSortField.external_id: Record.external_id,
    RecordSortField.inserted_at: Record.inserted_at,
    RecordSortField.updated_at: Record.updated_at,
    RecordSortField.status: Record.status,
}
_SUGGESTION_COLUMNS = {"agent": Suggestion.agent, "type": Suggestion.type}


def _session_of(instance: Dataset | MetadataProperty) -> AsyncSession:
    session = async_object_session(instance)
    if session is None:
        # Every caller in argilla-server 2.8 passes an object loaded by the current request.
        raise RuntimeError(f"{instance!r} is not attached to a database session; the SQL search engine needs one")
    return session


def _shuffle_key(user_id: UUID | str, record_id: UUID) -> bytes:
    """A per-user, stable position for a record: each annotator sees the records in their own order
    (as Elasticsearch's seeded ``random_score`` does), so overlapping annotators spread over the
    dataset instead of all rating the same first records."""
    return hashlib.blake2b(f"{user_id}:{record_id}".encode(), digest_size=8).digest()


def _as_column_value(column: ColumnElement, value: Any) -> Any:
    """Range bounds arrive as floats or strings; datetime columns need datetimes."""
    if isinstance(value, str) and isinstance(column.type, DateTime):
        return datetime.fromisoformat(value)
    return value


def _match(expression: ColumnElement, filter: TermsFilter | RangeFilter) -> ColumnElement[bool]:
    if isinstance(filter, TermsFilter):
        return expression.in_(filter.values)
    bounds = []
    if filter.ge is not None:
        bounds.append(expression >= _as_column_value(expression, filter.ge))
    if filter.le is not None:
        bounds.append(expression <= _as_column_value(expression, filter.le))
    return and_(true(), *bounds)


def _json_match(expression: Any, filter: TermsFilter | RangeFilter) -> ColumnElement[bool]:
    """Match a JSON value: as text for terms, as a number for ranges."""
    return _match(expression.as_string() if isinstance(filter, TermsFilter) else expression.as_float(), filter)


def _cosine_score(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity mapped to [0, 1] the way Elasticsearch scores ``cosine`` vectors."""
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    if norm == 0:
        return 0.0
    return (1 + sum(x * y for x, y in zip(a, b, strict=True)) / norm) / 2


@SearchEngine.register(ENGINE_NAME)
class SQLSearchEngine(SearchEngine):
    """Searches, counts and sorts records with SQL on the server's database."""

    @classmethod
    async def new_instance(cls) -> SQLSearchEngine:
        return cls()

    async def close(self) -> None:
        """Nothing to release: the engine holds no connection of its own."""

    async def ping(self) -> bool:
        return True

    async def info(self) -> dict:
        return {"name": ENGINE_NAME, "backend": "the argilla-server database (no search index)"}

    # --- Index maintenance: the database is the index, so there is nothing to mirror. ---------

    async def create_index(self, dataset: Dataset) -> None:
        pass

    async def delete_index(self, dataset: Dataset) -> None:
        pass

    async def configure_metadata_property(self, dataset: Dataset, metadata_property: MetadataProperty) -> None:
        pass

    async def configure_index_vectors(self, vector_settings: VectorSettings) -> None:
        pass

    async def index_records(self, dataset: Dataset, records: Iterable[Record]) -> None:
        pass

    async def partial_record_update(self, record: Record, **update: Any) -> None:
        pass

    async def delete_records(self, dataset: Dataset, records: Iterable[Record]) -> None:
        pass

    async def update_record_response(self, response: Response) -> None:
        pass

    async def delete_record_response(self, response: Response) -> None:
        pass

    async def update_record_suggestion(self, suggestion: Suggestion) -> None:
        pass

    async def delete_record_suggestion(self, suggestion: Suggestion) -> None:
        pass

    # --- Counts -----------------------------------------------------------------------------

    async def get_dataset_progress(self, dataset: Dataset) -> dict:
        """Records per status: ``{"total", "pending", "completed"}`` (empty for a draft dataset)."""
        if dataset.is_draft:
            return {}
        rows = await _session_of(dataset).execute(
            select(Record.status, func.count()).where(Record.dataset_id == dataset.id).group_by(Record.status)
        )
        counts = {str(status): count for status, count in rows}
        return {"total": sum(counts.values()), **counts}

    async def get_dataset_user_progress(self, dataset: Dataset, user: User) -> dict:
        """The user's responses per status: ``{"total", "submitted", "draft", "discarded"}``."""
        if dataset.is_draft:
            return {}
        rows = await _session_of(dataset).execute(
            select(Response.status, func.count())
            .join(Record, Record.id == Response.record_id)
            .where(Record.dataset_id == dataset.id, Response.user_id == user.id)
            .group_by(Response.status)
        )
        counts = {str(status): count for status, count in rows}
        return {"total": sum(counts.values()), **counts}

    async def compute_metrics_for(self, metadata_property: MetadataProperty) -> MetadataMetrics:
        """Value counts (terms) or min/max (numbers) of one metadata property over its dataset."""
        name = metadata_property.name
        element = Record.metadata_[name]
        values = await _session_of(metadata_property).scalars(
            select(element.as_string() if metadata_property.is_terms else element.as_float()).where(
                Record.dataset_id == metadata_property.dataset_id
            )
        )
        present = [value for value in values if value is not None]
        if metadata_property.type == MetadataPropertyType.terms:
            counts = Counter(present)
            return TermsMetrics(
                total=sum(counts.values()),
                values=[TermsMetrics.TermCount(term=term, count=count) for term, count in counts.most_common()],
            )
        if metadata_property.type == MetadataPropertyType.integer:
            numbers = [int(value) for value in present]
            return IntegerMetadataMetrics(min=min(numbers, default=None), max=max(numbers, default=None))
        return FloatMetadataMetrics(min=min(present, default=None), max=max(present, default=None))

    # --- Search -----------------------------------------------------------------------------

    async def search(
        self,
        dataset: Dataset,
        query: TextQuery | str | None = None,
        filter: Filter | None = None,
        sort: list[Order] | None = None,
        offset: int = 0,
        limit: int = 100,
        user_id: UUID | None = None,
    ) -> SearchResponses:
        """Ids of the matching records, one page of them, and how many match in all.

        Without an explicit ``sort``, a request made for a user (``user_id``, passed by the
        annotator endpoints) gets that user's own stable shuffle; otherwise records come in
        insertion order. There is no relevance ranking: ``score`` is left empty.
        """
        session = _session_of(dataset)
        where = await self._conditions(dataset, query, filter)
        if user_id is not None and not sort:
            ids = list(await session.scalars(select(Record.id).where(where)))
            ids.sort(key=lambda record_id: _shuffle_key(user_id, record_id))
            page, total = ids[offset : offset + limit], len(ids)
        else:
            order_by = [await self._order_expression(dataset, order) for order in sort or []]
            total = await session.scalar(select(func.count()).select_from(Record).where(where))
            page = list(
                await session.scalars(
                    select(Record.id)
                    .where(where)
                    .order_by(*order_by, Record.inserted_at, Record.id)
                    .offset(offset)
                    .limit(limit)
                )
            )
        return SearchResponses(items=[SearchResponseItem(record_id=record_id) for record_id in page], total=total)

    async def similarity_search(
        self,
        dataset: Dataset,
        vector_settings: VectorSettings,
        value: list[float] | None = None,
        record: Record | None = None,
        query: TextQuery | str | None = None,
        filter: Filter | None = None,
        max_results: int = 100,
        order: SimilarityOrder = SimilarityOrder.most_similar,
        threshold: float | None = None,
    ) -> SearchResponses:
        """Exact nearest neighbours by cosine similarity, computed over every vector of the dataset."""
        if bool(value) == bool(record):
            raise ValueError("Must provide either vector value or record to compute the similarity search")
        target = value or record.vector_value_by_vector_settings(vector_settings)
        if not target:
            raise ValueError("Cannot find a vector value to apply with provided info")
        where = await self._conditions(dataset, query, filter)
        if record is not None:
            where = and_(where, Record.id != record.id)
        rows = await _session_of(dataset).execute(
            select(Record.id, Vector.value)
            .join(Vector, Vector.record_id == Record.id)
            .where(where, Vector.vector_settings_id == vector_settings.id)
        )
        scored = [(record_id, _cosine_score(target, vector)) for record_id, vector in rows]
        if threshold is not None:
            scored = [(record_id, score) for record_id, score in scored if score >= threshold]
        scored.sort(key=lambda item: item[1], reverse=order == SimilarityOrder.most_similar)
        items = [SearchResponseItem(record_id=record_id, score=score) for record_id, score in scored[:max_results]]
        return SearchResponses(items=items, total=len(items))

    # --- Query building ----------------------------------------------------------------------

    async def _conditions(
        self, dataset: Dataset, query: TextQuery | str | None, filter: Filter | None
    ) -> ColumnElement[bool]:
        conditions = [Record.dataset_id == dataset.id]
        if query is not None:
            conditions.append(await self._text_condition(dataset, query))
        if filter is not None:
            conditions.append(self._filter_condition(filter))
        return and_(*conditions)

    @staticmethod
    async def _text_condition(dataset: Dataset, query: TextQuery | str) -> ColumnElement[bool]:
        """Every word of the query occurs (case-insensitively) in the field, or in any field.

        A substring test, not Elasticsearch's analysed full-text match: no stemming, no operators,
        and on SQLite case folding covers ASCII letters only.
        """
        text = TextQuery(q=query) if isinstance(query, str) else query
        fields = await dataset.awaitable_attrs.fields
        names = [text.field] if text.field else [field.name for field in fields]
        haystacks = [Record.fields[name].as_string() for name in names]
        words = text.q.split()
        if not words:
            return true()

        def contains(word: str) -> ColumnElement[bool]:
            escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            return or_(*(haystack.ilike(f"%{escaped}%", escape="\\") for haystack in haystacks))

        return and_(*(contains(word) for word in words))

    def _filter_condition(self, filter: Filter) -> ColumnElement[bool]:
        if isinstance(filter, AndFilter):
            return and_(true(), *(self._filter_condition(part) for part in filter.filters))
        scope = filter.scope
        if isinstance(scope, RecordFilterScope):
            return _match(_RECORD_COLUMNS[RecordSortField(scope.property)], filter)
        if isinstance(scope, MetadataFilterScope):
            return _json_match(Record.metadata_[scope.metadata_property], filter)
        if isinstance(scope, ResponseFilterScope):
            return self._response_condition(scope, filter)
        if isinstance(scope, SuggestionFilterScope) and scope.property in _SUGGESTION_COLUMNS:
            suggestions = (
                select(Suggestion.id)
                .join(Question, Question.id == Suggestion.question_id)
                .where(Suggestion.record_id == Record.id, Question.name == scope.question)
            )
            return exists(suggestions.where(_match(_SUGGESTION_COLUMNS[scope.property], filter)))
        raise UnprocessableEntityError(f"The SQL search engine cannot filter on {scope!r}")

    @staticmethod
    def _responses_of_record(scope: ResponseFilterScope) -> list[ColumnElement[bool]]:
        """The record's responses, narrowed to the scope's user when there is one."""
        conditions = [Response.record_id == Record.id]
        if scope.user is not None:
            conditions.append(Response.user_id == scope.user.id)
        return conditions

    def _response_condition(self, scope: ResponseFilterScope, filter: TermsFilter | RangeFilter) -> ColumnElement[bool]:
        mine = self._responses_of_record(scope)
        if scope.question:
            value = Response.values[(scope.question, "value")]
            return exists(select(Response.id).where(*mine, _json_match(value, filter)))
        if scope.property == "status" and isinstance(filter, TermsFilter):
            # "pending" is the absence of a response (from the user, or from anyone without a user).
            statuses = [value for value in filter.values if value != ResponseStatusFilter.pending]
            alternatives = []
            if ResponseStatusFilter.pending in filter.values:
                alternatives.append(~exists(select(Response.id).where(*mine)))
            if statuses:
                alternatives.append(exists(select(Response.id).where(*mine, Response.status.in_(statuses))))
            return or_(false(), *alternatives)
        raise UnprocessableEntityError(f"The SQL search engine cannot filter responses on {scope!r}")

    async def _order_expression(self, dataset: Dataset, order: Order) -> ColumnElement:
        scope = order.scope
        if isinstance(scope, RecordFilterScope):
            expression = _RECORD_COLUMNS[RecordSortField(scope.property)]
        elif isinstance(scope, MetadataFilterScope):
            properties = await dataset.awaitable_attrs.metadata_properties
            numeric = any(p.name == scope.metadata_property and not p.is_terms for p in properties)
            value = Record.metadata_[scope.metadata_property]
            expression = value.as_float() if numeric else value.as_string()
        elif isinstance(scope, ResponseFilterScope) and scope.question:
            expression = (
                select(func.avg(Response.values[(scope.question, "value")].as_float()))
                .where(*self._responses_of_record(scope))
                .scalar_subquery()
            )
        else:
            raise UnprocessableEntityError(f"The SQL search engine cannot sort by {scope!r}")
        return expression.desc() if order.order == SortOrder.desc else expression.asc()
