from django.core.management.base import CommandParser

from core.commands import ShiftlabCommand
from evaluation.embedding_cache import SMALL_SHARD_ROWS, compact_cache


class Command(ShiftlabCommand):
    help = (
        "Merge the embedding cache's small shards (one per encoding call) into one shard per model and "
        "prompt, and remove expired claims. Safe while workers read and write the cache."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--cache",
            help="Cache path or URL (default: SHIFTLAB_EMBEDDING_CACHE_URL, else SHIFTLAB_EMBEDDING_CACHE_DIR).",
        )
        parser.add_argument(
            "--small-rows",
            type=int,
            default=SMALL_SHARD_ROWS,
            help=f"Merge shards of fewer rows than this (default {SMALL_SHARD_ROWS}).",
        )

    def handle(self, *args, **o):
        result = compact_cache(o["cache"], small_rows=o["small_rows"])
        self.stdout.write(
            f"{result.folders} cache folders: {result.shards_merged} small shards merged into "
            f"{result.shards_written} ({result.rows} rows); {result.claims_removed} expired claims removed."
        )
