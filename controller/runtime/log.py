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
* `fmt="klog"`: klog's header, `I1201 08:00:11.987654    4242 worker.py:123] message key="v"`
  (severity letter I/W/E/F, local time, pid padded to 7, file:line), which kube-ovn's tooling
  (`kubectl ko log`, greps on `^E`) reads; `skip_headers` drops the header as klog does.
* `outputs=LogOutputs(...)` gives klog's destinations: with `logtostderr` (the default) only
  stderr; otherwise `log_file` (or a klog-named file in `log_dir`, with the
  `kube-ovn-controller.INFO` symlink) gets every line, stderr gets every line with
  `alsologtostderr`, else those at `stderrthreshold` and above. A file that reaches
  `log_file_max_size` MB starts over, as klog's does. A file that cannot be opened is a
  `ValueError` naming it.
* Every line emitted is counted by level (`line_counts()`: INFO, WARN, ERROR, as klog's
  `klog_lines_total`); `set_verbosity("4")` / `set_verbosity("warning")` changes the level at
  runtime (klog verbosity 3 or more is debug), keeping the library floors.
"""

from __future__ import annotations

import datetime
import getpass
import json
import logging
import logging.handlers
import os
import socket
import sys
import threading
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from controller.config import KLOG_DEBUG_VERBOSITY, LOG_FORMATS

LOG = logging.getLogger(__name__)

PROGRAM = "kube-ovn-controller"
MB = 1024 * 1024

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


def _klog_value(value: Any) -> str:
    if isinstance(value, int | float | bool):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)


def _severity(levelno: int) -> str:
    if levelno >= logging.CRITICAL:
        return "F"
    if levelno >= logging.ERROR:
        return "E"
    if levelno >= logging.WARNING:
        return "W"
    return "I"


class KlogFormatter(logging.Formatter):
    """klog's text header (`Lmmdd hh:mm:ss.uuuuuu pid file:line] msg`), extras as key="value"."""

    def __init__(self, *, skip_headers: bool = False) -> None:
        super().__init__()
        self._skip_headers = skip_headers

    def format(self, record: logging.LogRecord) -> str:
        line = record.getMessage()
        extras = _extras(record)
        if extras:
            line += " " + " ".join(f"{k}={_klog_value(v)}" for k, v in sorted(extras.items()))
        if not self._skip_headers:
            ts = datetime.datetime.fromtimestamp(record.created)
            line = (
                f"{_severity(record.levelno)}{ts:%m%d %H:%M:%S}.{ts.microsecond:06d} "
                f"{record.process or 0:7d} {record.filename}:{record.lineno}] {line}"
            )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


@dataclass(frozen=True, slots=True)
class LogOutputs:
    """klog's destination flags (`--logtostderr`, `--log_file`, ...), klog's defaults."""

    logtostderr: bool = True
    alsologtostderr: bool = False
    log_file: str = ""
    log_dir: str = ""
    log_file_max_size: int = 1800  # MB, 0: unlimited
    stderrthreshold: str = "ERROR"  # INFO, WARNING, ERROR or FATAL


_THRESHOLDS = {
    "INFO": logging.DEBUG,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}


class _RestartingFileHandler(logging.handlers.RotatingFileHandler):
    """klog's --log_file_max_size: a full file is truncated and written again from the start."""

    def doRollover(self) -> None:
        if self.stream:
            self.stream.close()
        self.stream = open(self.baseFilename, "w", encoding=self.encoding)  # noqa: SIM115


def _log_file_path(outputs: LogOutputs) -> Path:
    if outputs.log_file:
        return Path(outputs.log_file)
    # klog: <dir>/<program>.<host>.<user>.log.<SEVERITY>.<yyyymmdd-hhmmss>.<pid>, plus a
    # <program>.<SEVERITY> symlink to the newest; one file holds every severity here.
    directory = Path(outputs.log_dir or os.environ.get("TMPDIR", "/tmp"))
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"{PROGRAM}.{socket.gethostname()}.{user}.log.INFO.{stamp}.{os.getpid()}"
    return directory / name


def _file_handler(outputs: LogOutputs) -> logging.Handler:
    path = _log_file_path(outputs)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = _RestartingFileHandler(
            path, maxBytes=max(outputs.log_file_max_size, 0) * MB, encoding="utf-8"
        )
    except OSError as exc:
        raise ValueError(f"cannot open the log file {path}: {exc.strerror or exc}") from None
    if not outputs.log_file:
        link = path.parent / f"{PROGRAM}.INFO"
        try:
            link.unlink(missing_ok=True)
            link.symlink_to(path.name)
        except OSError:
            pass  # klog ignores a failed symlink too
    return handler


class _LineCounter(logging.Handler):
    """Counts every line that reaches the root logger's handlers, by klog severity name."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self._counts_lock = threading.Lock()
        self.counts: dict[str, int] = {"INFO": 0, "WARN": 0, "ERROR": 0}

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            level = "ERROR"
        elif record.levelno >= logging.WARNING:
            level = "WARN"
        else:
            level = "INFO"
        with self._counts_lock:
            self.counts[level] += 1

    def snapshot(self) -> dict[str, int]:
        with self._counts_lock:
            return dict(self.counts)


_COUNTER = _LineCounter()
_state: dict[str, Any] = {"debug_libraries": False, "level": logging.INFO}


def line_counts() -> dict[str, int]:
    """Lines logged since the process started, by level (INFO, WARN, ERROR)."""
    return _COUNTER.snapshot()


def _apply_level(numeric: int, debug_libraries: bool) -> None:
    logging.getLogger().setLevel(numeric)
    for name, floor in LIBRARY_LEVELS.items():
        logging.getLogger(name).setLevel(numeric if debug_libraries else max(numeric, floor))
    _state["level"] = numeric
    _state["debug_libraries"] = debug_libraries


def current_level() -> int:
    return int(_state["level"])


def set_verbosity(value: str) -> str:
    """Change the level at runtime: a klog verbosity (`"0"`..`"10"`) or a level name.

    Returns a one-line confirmation; raises ValueError (with a message) on anything else.
    """
    text = value.strip()
    if text.isdigit():
        numeric = logging.DEBUG if int(text) >= KLOG_DEBUG_VERBOSITY else logging.INFO
    else:
        try:
            numeric = parse_level(text)
        except ValueError:
            raise ValueError(
                f"invalid verbosity {text!r}: an integer (klog -v, 3 or more is debug) or "
                "debug, info, warning, error"
            ) from None
    _apply_level(numeric, bool(_state["debug_libraries"]))
    name = logging.getLevelName(numeric).lower()
    LOG.warning("log level set to %s at runtime (requested %r)", name, text)
    return f"log level set to {name}"


def parse_level(level: str | int) -> int:
    """`"info"`, `"INFO"`, `20` -> 20; a clear `ValueError` for anything else."""
    if isinstance(level, int):
        return level
    resolved = logging.getLevelName(level.strip().upper())
    if not isinstance(resolved, int):
        raise ValueError(f"unknown log level {level!r}; use debug, info, warning or error")
    return resolved


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is when a record is emitted, not the stream of the set-up
    time: a program embedding the controller (or a test runner's capture) may replace and close
    the stream a handler was built with while the controller's threads still log."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass  # always the current sys.stderr


def setup_logging(
    level: str | int = "info",
    fmt: str = "text",
    *,
    stream: TextIO | None = None,
    debug_libraries: bool = False,
    outputs: LogOutputs | None = None,
    skip_headers: bool = False,
) -> logging.Handler:
    """Configure the root logger; return the first installed handler (stderr's, else the file's).

    With `outputs.logtostderr` false the file handler comes first (stderr may get only errors).
    """
    numeric = parse_level(level)
    if fmt not in LOG_FORMATS:
        raise ValueError(f"unknown log format {fmt!r}; use one of {', '.join(LOG_FORMATS)}")
    out = outputs or LogOutputs()
    if out.stderrthreshold not in _THRESHOLDS:
        raise ValueError(f"unknown stderr threshold {out.stderrthreshold!r}")
    formatter: logging.Formatter
    if fmt == "json":
        formatter = JsonFormatter()
    elif fmt == "klog":
        formatter = KlogFormatter(skip_headers=skip_headers)
    else:
        formatter = TextFormatter()
    handlers: list[logging.Handler] = []
    if not out.logtostderr:
        handlers.append(_file_handler(out))
    err = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    if not out.logtostderr and not out.alsologtostderr:
        err.setLevel(_THRESHOLDS[out.stderrthreshold])
    handlers.append(err)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
        if old is not _COUNTER:
            old.close()
    for handler in (*handlers, _COUNTER):
        handler.setFormatter(formatter)
        setattr(handler, _HANDLER_MARK, True)
        root.addHandler(handler)
    _apply_level(numeric, debug_libraries)
    return handlers[0]


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
