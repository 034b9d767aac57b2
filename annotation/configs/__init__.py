"""Validated benchmark configs, the format (pure, below the models): schema, text, canonical form,
signing and hashing. Their export from approved studies is ``annotation.export_services``."""
