"""Validated benchmark configs: their schema, signing and hashing (pure), and their export."""
