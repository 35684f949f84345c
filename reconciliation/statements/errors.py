"""The one error the statement parsers raise: precise enough for ops to fix the file or ask the bank."""

from core.exceptions import InvalidInput


class StatementParseError(InvalidInput):
    """A statement file that must not be imported, not even partly.

    ``code`` is stable: ``malformed_xml``, ``dtd_forbidden``, ``file_too_large``, ``unsupported_document``,
    ``missing_element``, ``invalid_value``, ``encoding_error``, ``missing_column``, ``invalid_row``.
    ``line`` is the 1-based line of the file (XML source line, CSV physical line) when known.
    """

    code = "statement_parse_error"

    def __init__(self, code: str, message: str, line: int | None = None):
        self.line = line
        text = f"line {line}: {message}" if line is not None else message
        super().__init__(text, code=code, details={"line": line})
