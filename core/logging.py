"""Logging helpers used by the settings' LOGGING dict."""

import logging


class NoTracebackBelow500(logging.Filter):
    """A refused request (403, 404 …) is logged as one line: its traceback says nothing new and
    buried the real errors (issue 16). Server errors keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", 500) < 500:
            record.exc_info = None
            record.exc_text = None
        return True
