"""The argparse parser built from `declarations.GROUPS`, and Go's flag syntax brought to it.

`build_parser()` raises `ConfigError` instead of printing and exiting on a bad command line;
`normalize_bool_flags` and `strip_start_script` adapt Go flag syntax and kube-ovn's container
args (its wrapper script first) before argparse sees them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from controller.config_flags.declarations import (
    BOOL_FLAGS,
    COMMAND_RUN,
    COMMANDS,
    GROUPS,
    KUBE_OVN_START_SCRIPT,
    Flag,
)
from controller.core.errors import ConfigError


class _RaisingParser(argparse.ArgumentParser):
    """argparse prints and exits on errors; we want a ConfigError instead."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


class _HelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" where the default says something: not for an empty or unset
    one (the help text says what that means); booleans as kube-ovn writes them, true/false;
    durations in seconds."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default is None or default == "" or default is argparse.SUPPRESS or not text:
            return text
        if isinstance(default, bool):
            shown = "true" if default else "false"
        elif isinstance(default, float):
            shown = f"{default:g}s"
        else:
            shown = str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


def _add_flag(group: argparse._ArgumentGroup, flag: Flag) -> None:
    kwargs: dict[str, Any] = {"default": flag.default, "help": flag.help}
    if flag.dest is not None:
        kwargs["dest"] = flag.dest
    if flag.type is not None:
        kwargs["type"] = flag.type
    if flag.choices is not None:
        kwargs["choices"] = flag.choices
    if flag.boolean:
        kwargs.update(nargs="?", const=True, metavar="BOOL")
    group.add_argument(*flag.names, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser (for --help and for `controller.config.parse_args`)."""
    p = _RaisingParser(
        prog="kube-ovn-controller",
        description="kube-ovn pod network controller (Python re-implementation)",
        epilog="--version prints the version and exits.",
        formatter_class=_HelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument(
        "command",
        nargs="?",
        default=COMMAND_RUN,
        choices=COMMANDS,
        help="run the controller, or check (audit the cluster against OVN and exit)",
    )
    p.add_argument("--kubeconfig", default="", help="path to a kubeconfig; in-cluster if empty")
    for title, flags in GROUPS:
        group = p.add_argument_group(title)
        for flag in flags:
            _add_flag(group, flag)
    return p


def normalize_bool_flags(argv: Sequence[str]) -> list[str]:
    """Go flag syntax on argparse: a bare boolean never eats the next word (`--flag=true`), and
    a single dash works for long names as with Go's flag package (`-v=3`, `-logtostderr=false`)."""
    out = []
    for arg in argv:
        if arg.startswith("-") and not arg.startswith("--") and arg not in ("-", "-h"):
            arg = "-" + arg  # noqa: PLW2901
        out.append(f"{arg}=true" if arg in BOOL_FLAGS else arg)
    return out


def strip_start_script(argv: Sequence[str]) -> list[str]:
    """kube-ovn's container args begin with its wrapper script: skip it."""
    args = list(argv)
    if args and args[0].rsplit("/", 1)[-1] == KUBE_OVN_START_SCRIPT:
        return args[1:]
    return args
