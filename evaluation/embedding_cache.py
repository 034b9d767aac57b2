"""Embedding cache shared by every worker host: each unique text is encoded once per model
revision and prompt, by whichever host needs it first.

Where: ``settings.EMBEDDING_CACHE_URL`` (``SHIFTLAB_EMBEDDING_CACHE_URL``) when set, else
``settings.EMBEDDING_CACHE_DIR``. A plain path (local disk, or a shared filesystem such as NFS or
CephFS mounted on every host), ``file://...``, or an fsspec URL for object storage
(``s3://bucket/prefix``, which needs fsspec's package for it, s3fs).

Layout::

    <model-id-slug>--<revision[:16]>/     one folder per exact model (see Encoder.revision)
        <prompt>/                         "no-prompt", or "prompt-<name>" for instruction prompts
            meta.json                     model id, full revision, prompt name, dimension
            <shard>.keys.npy              sha256 of each text (64-byte ASCII rows)
            <shard>.vectors.npy           float32 rows in the same order
            claims/<time>-<host>-...json  texts a host is encoding right now (expiring)

Writes. Shards are plain numpy files (never pickles, never the database), written keys first and
vectors last, each file appearing whole or not at all: on a filesystem a temporary file renamed
in place (atomic within a directory, NFS included), on an object store a single PUT. A shard
exists for readers once its vectors file does, so nobody sees half a shard and writers on any
number of hosts never need a lock.

Claims. Before encoding the texts it lacks, a host writes a claim naming them, then lists the live
claims: a text that an older claim (claims sort by the time in their name) also names is left to
that claim's host, and this host waits for its vectors instead of encoding it. The claim is
renewed after every request to the model (``FIRST_CHUNK`` texts, then ``ENCODE_CHUNK``), when the
host also looks again for older claims, and lapses after ``settings.EMBEDDING_CLAIM_SECONDS``
without renewal: the texts of a host that died are taken over by the others. Before each request
a host also drops the texts stored since it looked (a host may finish and release its claim between
our first look and our claim). A text is encoded twice only when two hosts claim it at nearly the
same moment (within their clock difference, or while the older claim is being written), so that the
younger host did not see the older claim: it stops after the request it has in flight when the older
claim appears, and the older host, seeing the younger claim, encodes from the other end of the list.
At most that one request's texts are encoded by both, and either copy serves.

Compaction (:func:`compact_cache`, ``manage.py compact_embeddings``) merges small shards into one:
the merged shard is written before the small ones are removed, and readers that lose a shard
they had listed look again, so compaction is safe while other processes read and write.
"""

from __future__ import annotations

import io
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings

from core.errors import ShiftlabError
from core.hashing import sha256_text
from evaluation.embedding_storage import Storage, cache_storage
from evaluation.encoders import Encoder, EncoderError, slug

_KEY_DTYPE = "S64"
_KEYS, _VECTORS, _META, _CLAIMS = ".keys.npy", ".vectors.npy", "meta.json", "claims"
#: Texts sent to the model per request and written per shard; a host's claim is renewed after each.
ENCODE_CHUNK = 4096
#: The first request is smaller: two hosts that claim the same texts at the same moment both
#: encode it before they see each other's claim.
FIRST_CHUNK = 256
#: Seconds between looks for texts another host has claimed (doubling up to WAIT_POLL_MAX).
WAIT_POLL_SECONDS = 0.2
WAIT_POLL_MAX = 5.0
#: compact_cache merges the shards of fewer rows than this.
SMALL_SHARD_ROWS = 4096


@dataclass
class _Shard:
    name: str
    vectors: np.ndarray | None = None


@dataclass
class Claim:
    path: str
    name: str
    keys: list[bytes]


RETRIES_AFTER_COMPACTION = 20  # re-listings a reader tries when compaction removes shards under it


class EmbeddingStore:
    """The shards of one (model revision, prompt) folder, indexed by text hash in memory; vectors
    are opened only when rows of their shard are asked for."""

    def __init__(self, storage: Storage, directory: str):
        self.storage = storage
        self.directory = directory
        self.lock = threading.Lock()
        self.dim: int | None = None
        self._shards: list[_Shard] = []
        self._loaded: set[str] = set()
        self._index: dict[bytes, tuple[int, int]] = {}

    def refresh(self) -> None:
        """Index shards written since the last look (by this or any other process or host)."""
        for _ in range(10):
            names = self.storage.list(self.directory)
            vanished = False
            for shard in sorted(n.removesuffix(_VECTORS) for n in names if n.endswith(_VECTORS)):
                if shard in self._loaded:
                    continue
                try:
                    keys = self.storage.load_array(self.storage.join(self.directory, shard + _KEYS), mmap=False)
                except FileNotFoundError:
                    vanished = True  # compacted away: the merged shard is in the next listing
                    continue
                self._register(_Shard(shard), keys)
            if self.dim is None and _META in names:
                self.dim = int(json.loads(self.storage.read(self.storage.join(self.directory, _META)))["dim"])
            if not vanished:
                return

    def missing(self, keys: Sequence[bytes]) -> list[bytes]:
        return [key for key in keys if key not in self._index]

    def add(self, keys: Sequence[bytes], vectors: np.ndarray, *, meta: dict) -> None:
        if self.dim is not None and vectors.shape[1] != self.dim:
            raise EncoderError(
                f"The model returned {vectors.shape[1]}-dimensional vectors but {self.directory} holds "
                f"{self.dim}-dimensional ones: the model changed without its revision changing."
            )
        if self.dim is None:
            self.dim = int(vectors.shape[1])
            meta_path = self.storage.join(self.directory, _META)
            if _META not in self.storage.list(self.directory):
                self.storage.write(meta_path, json.dumps({**meta, "dim": self.dim}).encode())
        shard = f"{os.getpid()}-{uuid.uuid4().hex}"
        key_array = np.array(keys, dtype=_KEY_DTYPE)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        _write_shard(self.storage, self.directory, shard, key_array, vectors)
        self._register(_Shard(shard, vectors), key_array)

    def rows(self, keys: Sequence[bytes]) -> np.ndarray:
        """Vectors of ``keys`` in their order (every key must be cached)."""
        for _ in range(RETRIES_AFTER_COMPACTION):
            try:
                return self._rows(keys)
            except FileNotFoundError:
                # A shard was compacted away before its vectors were opened: index the merged one.
                # Each miss means a compaction made progress, so a few tries always end.
                self._shards, self._loaded, self._index = [], set(), {}
                self.refresh()
        return self._rows(keys)

    def _rows(self, keys: Sequence[bytes]) -> np.ndarray:
        out = np.empty((len(keys), self.dim or 0), dtype=np.float32)
        if not keys:
            return out
        located = np.array([self._index[key] for key in keys], dtype=np.int64)
        for number in np.unique(located[:, 0]):
            shard = self._shards[number]
            if shard.vectors is None:
                path = self.storage.join(self.directory, shard.name + _VECTORS)
                shard.vectors = self.storage.load_array(path, mmap=True)
            mask = located[:, 0] == number
            out[mask] = shard.vectors[located[mask, 1]]
        return out

    def _register(self, shard: _Shard, keys: np.ndarray) -> None:
        number = len(self._shards)
        self._shards.append(shard)
        self._loaded.add(shard.name)
        for row, key in enumerate(keys.tolist()):
            self._index.setdefault(key, (number, row))

    # --- claims ----------------------------------------------------------------------------------

    def claim(self, keys: Sequence[bytes], *, seconds: float) -> tuple[Claim, set[bytes], set[bytes]]:
        """Claim ``keys``; return the claim, the keys an older live claim holds and the keys a
        younger live claim holds (a host that has not seen this claim yet may be encoding them)."""
        host = slug(socket.gethostname(), max_length=40)
        name = f"{time.time_ns():020d}-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        claim = Claim(self.storage.join(self.directory, _CLAIMS, f"{name}.json"), name, list(keys))
        self.renew(claim, keys, seconds=seconds)
        older, younger = self._held_by_others(claim)
        return claim, older, younger

    def held_by_older(self, claim: Claim) -> set[bytes]:
        """The keys of ``claim`` that an older live claim also holds."""
        return self._held_by_others(claim)[0]

    def _held_by_others(self, claim: Claim) -> tuple[set[bytes], set[bytes]]:
        older: set[bytes] = set()
        younger: set[bytes] = set()
        for name, keys in self.live_claims():
            if name != claim.name:
                (older if name < claim.name else younger).update(keys)
        return older.intersection(claim.keys), younger.intersection(claim.keys)

    def renew(self, claim: Claim, keys: Sequence[bytes], *, seconds: float) -> None:
        """Hold ``keys`` (those of the claim not stored yet) ``seconds`` longer."""
        claim.keys = list(keys)
        document = {"expires": time.time() + seconds, "keys": [key.decode("ascii") for key in claim.keys]}
        self.storage.write(claim.path, json.dumps(document).encode())

    def release(self, claim: Claim) -> None:
        self.storage.delete(claim.path)

    def live_claims(self) -> list[tuple[str, set[bytes]]]:
        """(name, keys) of every claim not expired, oldest first."""
        claims_dir = self.storage.join(self.directory, _CLAIMS)
        found = []
        now = time.time()
        for file_name in sorted(self.storage.list(claims_dir)):
            if not file_name.endswith(".json"):
                continue
            try:
                document = json.loads(self.storage.read(self.storage.join(claims_dir, file_name)))
            except FileNotFoundError:
                continue  # released while we listed
            if document["expires"] > now:
                found.append((file_name.removesuffix(".json"), {key.encode("ascii") for key in document["keys"]}))
        return found

    def wait_for(self, keys: set[bytes]) -> list[bytes]:
        """Wait until ``keys`` are stored, or until some of them are no longer claimed by anyone
        (their host died or failed); return the keys still missing then."""
        pause = WAIT_POLL_SECONDS
        while True:
            self.refresh()
            pending = {key for key in keys if key not in self._index}
            if not pending:
                return []
            held = set().union(*(claimed for _, claimed in self.live_claims()))
            if pending - held:
                return sorted(pending)
            time.sleep(pause)
            pause = min(pause * 2, WAIT_POLL_MAX)


def _write_shard(storage: Storage, directory: str, shard: str, keys: np.ndarray, vectors: np.ndarray) -> None:
    # Keys first, vectors last: readers take a shard to exist once its vectors file does.
    for suffix, array in ((_KEYS, keys), (_VECTORS, vectors)):
        buffer = io.BytesIO()
        np.save(buffer, array)
        storage.write(storage.join(directory, shard + suffix), buffer.getvalue())


_stores: dict[tuple[str, str], EmbeddingStore] = {}
_stores_lock = threading.Lock()


def _folder(encoder: Encoder, prompt_name: str | None) -> tuple[str, str]:
    model_folder = f"{slug(encoder.model_id)}--{encoder.revision[:16]}"
    return model_folder, "no-prompt" if prompt_name is None else f"prompt-{slug(prompt_name)}"


def cache_directory(encoder: Encoder, *, prompt_name: str | None = None, root: Path | None = None) -> Path:
    """The folder of a local cache that holds ``encoder``'s vectors for ``prompt_name``."""
    root = Path(root) if root is not None else Path(settings.EMBEDDING_CACHE_DIR)
    return root.joinpath(*_folder(encoder, prompt_name))


def _store(encoder: Encoder, prompt_name: str | None, root: str | Path | None) -> EmbeddingStore:
    storage = cache_storage(root)
    directory = storage.join(storage.root, *_folder(encoder, prompt_name))
    with _stores_lock:
        return _stores.setdefault((type(storage).__name__, directory), EmbeddingStore(storage, directory))


def encode_cached(
    encoder: Encoder,
    texts: Sequence[str],
    *,
    prompt_name: str | None = None,
    batch_size: int | None = None,
    root: str | Path | None = None,
) -> np.ndarray:
    """Embeddings of ``texts`` in input order, encoding only texts no host has stored for this
    model revision and prompt. Duplicates within ``texts`` are encoded once."""
    store = _store(encoder, prompt_name, root)
    keys = [sha256_text(text).encode("ascii") for text in texts]
    with store.lock:
        store.refresh()
        todo = list(dict.fromkeys(store.missing(keys)))
        if todo:
            text_of = dict(zip(keys, texts, strict=True))
            meta = {"model_id": encoder.model_id, "revision": encoder.revision, "prompt_name": prompt_name}
            while todo:
                todo = _encode_claimed(store, encoder, todo, text_of, prompt_name, batch_size, meta)
        return store.rows(keys)


def cached_missing(
    encoder: Encoder, texts: Sequence[str], *, prompt_name: str | None = None, root: str | Path | None = None
) -> int:
    """How many distinct texts of ``texts`` no host has stored yet for this model revision and
    prompt: those ``encode_cached`` would encode now."""
    store = _store(encoder, prompt_name, root)
    keys = {sha256_text(text).encode("ascii") for text in texts}
    with store.lock:
        store.refresh()
        return len(store.missing(list(keys)))


def _encode_claimed(
    store: EmbeddingStore,
    encoder: Encoder,
    keys: list[bytes],
    text_of: dict[bytes, str],
    prompt_name: str | None,
    batch_size: int | None,
    meta: dict,
) -> list[bytes]:
    """Encode and store the ``keys`` no older claim holds; return those still missing after
    waiting for the others."""
    seconds = float(settings.EMBEDDING_CLAIM_SECONDS)
    claim, theirs, contested = store.claim(keys, seconds=seconds)
    try:
        # Longest first, so each request (and each batch in it) holds texts of similar length:
        # the model pads a batch to its longest text. A younger claim on the same texts belongs to
        # a host that listed the claims before ours appeared: it encodes from the front and stops
        # after its current request once it sees ours, so this host starts from the other end.
        mine = sorted((key for key in keys if key not in theirs), key=lambda key: -len(text_of[key]))
        if contested:
            mine.reverse()
        size = FIRST_CHUNK
        while mine:
            # Another host may have stored some of them since we looked (one that finished and
            # released its claim between our first look and our claim, or a younger host's request
            # that was in flight when our claim appeared).
            store.refresh()
            mine = store.missing(mine)
            chunk, mine = mine[:size], mine[size:]
            if not chunk:
                break
            vectors = encoder.encode([text_of[key] for key in chunk], batch_size=batch_size, prompt_name=prompt_name)
            if vectors.shape[0] != len(chunk):
                raise EncoderError(f"{encoder.model_id} returned {vectors.shape[0]} vectors for {len(chunk)} texts.")
            store.add(chunk, vectors, meta=meta)
            size = ENCODE_CHUNK
            if mine:
                store.renew(claim, mine, seconds=seconds)
                # An older claim written just after we looked (two hosts claiming at once) takes
                # the keys both hold from here on: a race duplicates at most one chunk.
                raced = store.held_by_older(claim)
                theirs |= raced
                mine = [key for key in mine if key not in raced]
    finally:
        store.release(claim)
    return store.wait_for(theirs) if theirs else []


@dataclass(frozen=True)
class CompactionResult:
    folders: int
    shards_merged: int
    shards_written: int
    rows: int
    claims_removed: int


def compact_cache(root: str | Path | None = None, *, small_rows: int = SMALL_SHARD_ROWS) -> CompactionResult:
    """Merge, in every (model, prompt) folder, the shards of fewer than ``small_rows`` rows into
    one shard, and remove expired claims. Safe while other processes and hosts read and write:
    the merged shard is stored before the small ones are removed (vectors first, so a listing
    never shows a shard without its keys)."""
    if small_rows < 2:
        raise ShiftlabError(f"small_rows must be at least 2, got {small_rows}.")
    storage = cache_storage(root)
    folders = merged = written = rows = claims_removed = 0
    for model in sorted(storage.list(storage.root)):
        for prompt in sorted(storage.list(storage.join(storage.root, model))):
            directory = storage.join(storage.root, model, prompt)
            names = storage.list(directory)
            if _META not in names:
                continue
            folders += 1
            claims_removed += _remove_expired_claims(storage, directory)
            small = []
            for shard in sorted(n.removesuffix(_VECTORS) for n in names if n.endswith(_VECTORS)):
                try:
                    keys = storage.load_array(storage.join(directory, shard + _KEYS), mmap=True)
                except FileNotFoundError:
                    continue
                if len(keys) < small_rows:
                    small.append(shard)
            if len(small) < 2:
                continue
            result = _merge(storage, directory, small)
            if result:
                merged, written, rows = merged + result[0], written + 1, rows + result[1]
    return CompactionResult(folders, merged, written, rows, claims_removed)


def _merge(storage: Storage, directory: str, shards: list[str]) -> tuple[int, int] | None:
    keys_parts, vector_parts, read = [], [], []
    for shard in shards:
        try:
            keys = storage.load_array(storage.join(directory, shard + _KEYS), mmap=False)
            vectors = storage.load_array(storage.join(directory, shard + _VECTORS), mmap=False)
        except FileNotFoundError:
            continue  # another compaction took it
        keys_parts.append(keys)
        vector_parts.append(vectors)
        read.append(shard)
    if len(read) < 2:
        return None
    keys = np.concatenate(keys_parts)
    _, first = np.unique(keys, return_index=True)
    first.sort()
    _write_shard(storage, directory, f"compacted-{uuid.uuid4().hex}", keys[first], np.concatenate(vector_parts)[first])
    for shard in read:
        storage.delete(storage.join(directory, shard + _VECTORS))
        storage.delete(storage.join(directory, shard + _KEYS))
    return len(read), len(first)


def _remove_expired_claims(storage: Storage, directory: str) -> int:
    claims_dir = storage.join(directory, _CLAIMS)
    removed = 0
    for file_name in storage.list(claims_dir):
        if not file_name.endswith(".json"):
            continue
        path = storage.join(claims_dir, file_name)
        try:
            expired = json.loads(storage.read(path))["expires"] < time.time()
        except FileNotFoundError:
            continue
        if expired:
            storage.delete(path)
            removed += 1
    return removed
