"""A failed job's error as it is stored: its type, message and the traceback of the job's
own code (the executor's frames and the thread pool's say nothing about the failure)."""

from __future__ import annotations

import concurrent.futures.thread
import os
import traceback

from runnel.jobs.model import ErrorInfo

_OURS = (
    os.path.join(os.path.dirname(__file__), "executor.py"),
    concurrent.futures.thread.__file__,
)


def error_info(exc: BaseException) -> ErrorInfo:
    return ErrorInfo(type=type(exc).__name__, message=str(exc), traceback=user_traceback(exc))


def user_traceback(exc: BaseException) -> str:
    """The traceback from the job's own code down."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename in _OURS:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))
