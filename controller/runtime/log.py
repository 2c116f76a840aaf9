"""Process-wide logging setup: one stdlib pipeline for us, python-ovs, ovsdbapp and `kubernetes`.

Contract:

* `setup_logging(level, fmt)` installs exactly one handler on the root logger (calling it again
  replaces it, never stacks a second one) writing to `stream` (stderr by default).
* `fmt="text"`: `2026-11-30T05:00:00.123Z INFO controller.pod.controller: message key=value` —
  extra fields are appended as `key=value`. `fmt="json"`: one JSON object per line with `ts`,
  `level`, `logger`, `msg`, every extra field (`pod`, ...) and `exc` when there is a traceback.
* Library loggers stay quiet even at `--log-level=debug`, unless `debug_libraries=True`: urllib3
  and `kubernetes` at WARNING (their INFO/DEBUG lines are per-request noise; urllib3 logs retries
  at WARNING anyway); the OVS IDL (python-ovs vlog, routed into stdlib by ovsdbapp's
  `vlog.use_python_logger()` under the `ovsdbapp.backend.ovs_idl.vlog` logger, which the OVN
  connection module installs) at INFO, because its connect/reconnect lines are what tells an
  operator the NB database went away, while its DEBUG lines dump every JSON-RPC message.
* `pod_logger(key)` returns a `LoggerAdapter` that tags every record with `pod=<ns/name>`
  (kopf's `ObjectLogger`), merged with any `extra=` given at the call.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

LOG = logging.getLogger(__name__)

FORMATS = ("text", "json")

# Library loggers and the least severe level they may emit when we are not debugging.
LIBRARY_LEVELS: Mapping[str, int] = {
    "urllib3": logging.WARNING,
    "kubernetes": logging.WARNING,
    "ovsdbapp.backend.ovs_idl.vlog": logging.INFO,
    "ovsdbapp": logging.INFO,
}

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RESERVED = frozenset(vars(logging.LogRecord("x", logging.INFO, "x", 0, "", None, None)).keys()) | {
    "message",
    "asctime",
    "taskName",
}

_HANDLER_MARK = "_kube_ovn_controller_handler"


def _timestamp(record: logging.LogRecord) -> str:
    ts = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _RESERVED and not k.startswith("_")}


class TextFormatter(logging.Formatter):
    """Human-readable single line, extras appended as `key=value`."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        extras = _extras(record)
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in sorted(extras.items()))
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line; never raises on unserialisable extras (they become `str`)."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _extras(record).items():
            doc.setdefault(key, value)
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return json.dumps(doc, default=str, ensure_ascii=False)


def parse_level(level: str | int) -> int:
    """`"info"`, `"INFO"`, `20` -> 20; a clear `ValueError` for anything else."""
    if isinstance(level, int):
        return level
    resolved = logging.getLevelName(level.strip().upper())
    if not isinstance(resolved, int):
        raise ValueError(f"unknown log level {level!r}; use debug, info, warning or error")
    return resolved


def setup_logging(
    level: str | int = "info",
    fmt: str = "text",
    *,
    stream: TextIO | None = None,
    debug_libraries: bool = False,
) -> logging.Handler:
    """Configure the root logger; return the installed handler."""
    numeric = parse_level(level)
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}; use one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(numeric)
    for name, floor in LIBRARY_LEVELS.items():
        logging.getLogger(name).setLevel(numeric if debug_libraries else max(numeric, floor))
    return handler


class PodLoggerAdapter(logging.LoggerAdapter[logging.Logger]):
    """Adds `pod=<key>`; unlike the stdlib adapter (before 3.13) keeps the caller's extras too."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


def pod_logger(key: str, logger: logging.Logger | None = None) -> PodLoggerAdapter:
    """A logger whose every record carries `pod=<key>` (the `namespace/name` work-queue key)."""
    return PodLoggerAdapter(logger or logging.getLogger("controller.pod.controller"), {"pod": key})
