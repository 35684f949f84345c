"""Bank statement parsers (camt.053, camt.054, CSV) producing plain dataclasses; no database access.

The importer (reconciliation services) owns persistence, dedupe and matching; this package only turns
bytes into ``ParsedStatement``/``ParsedEntry`` or raises ``StatementParseError``.
"""

from .camt import SUPPORTED_VERSIONS, iter_camt_statements, parse_camt, validate_camt
from .csv_import import CsvMapping, parse_csv
from .errors import StatementParseError
from .source import DEFAULT_MAX_BYTES
from .types import (
    ParsedBatch,
    ParsedEntry,
    ParsedParty,
    ParsedReturn,
    ParsedStatement,
    ParsedTxDetail,
    StatementSummary,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "SUPPORTED_VERSIONS",
    "CsvMapping",
    "ParsedBatch",
    "ParsedEntry",
    "ParsedParty",
    "ParsedReturn",
    "ParsedStatement",
    "ParsedTxDetail",
    "StatementParseError",
    "StatementSummary",
    "iter_camt_statements",
    "parse_camt",
    "parse_csv",
    "validate_camt",
]
