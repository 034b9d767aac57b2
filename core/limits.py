"""Largest values the database columns hold, for the API's input bounds: a larger number is a
400 with the field named, not an overflow in the query (a 500)."""

MAX_ID = 2**63 - 1  # BigAutoField primary keys (settings.DEFAULT_AUTO_FIELD)
MAX_SEED = 2**63 - 1  # seeds are BigIntegerField
MAX_COUNT = 2**31 - 1  # PositiveIntegerField counts and limits
