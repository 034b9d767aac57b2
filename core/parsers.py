"""The API's JSON parser: DRF's, with the body's nesting counted before ``json`` reads it.

A request body nested thousands of levels deep made ``json`` give up with a ``RecursionError``,
a 500; now it is a 400 that says why (``core.nesting``)."""

from __future__ import annotations

import io

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from core.nesting import NestingError, nesting_check


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = parsers.get_encoding(parser_context or {})
        raw = stream.read() if stream is not None else b""
        try:
            nesting_check(raw.decode(encoding), "json")
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - the body is not {encoding} text: {exc}") from None
        except NestingError as exc:
            raise ParseError(f"JSON parse error - the body is {exc}") from None
        return super().parse(io.BytesIO(raw), media_type, parser_context)
