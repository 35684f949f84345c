"""Bank statement parsers (camt.053, camt.054, CSV) producing plain dataclasses; no database access.

The importer (reconciliation services) owns persistence, dedupe and matching; this package only turns
bytes into ``ParsedStatement``/``ParsedEntry`` or raises ``StatementParseError``. Which parser reads
an upload is its ``StatementFormat`` (``formats``): the built-in ones are registered below.
"""

from .banks import BANK_FORMATS
from .camt import SUPPORTED_VERSIONS, iter_camt_statements, parse_camt, validate_camt
from .csv_import import CsvMapping, parse_csv
from .errors import StatementParseError
from .formats import (
    CAMT_FORMATS,
    StatementFormat,
    statement_format_choices,
    statement_format_get,
    statement_format_register,
    statement_format_validate,
    statement_formats,
)
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
    "StatementFormat",
    "StatementParseError",
    "StatementSummary",
    "iter_camt_statements",
    "parse_camt",
    "parse_csv",
    "statement_format_choices",
    "statement_format_get",
    "statement_format_register",
    "statement_format_validate",
    "statement_formats",
    "validate_camt",
]

for _builtin in (*CAMT_FORMATS, *BANK_FORMATS):
    statement_format_register(_builtin)
