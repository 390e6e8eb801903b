"""Every parameter of every command takes a value as typer's own pydantic adapter would.

`ops/cli/quick_params.py` takes plain values without building typer's adapters; for every
parameter of the app (the help options too) and values of every kind, given and not (None, good
and bad names, dates, numbers in and out of bounds, paths that exist, do not, or are folders), it
must return what typer's coercion returns, or raise the same error with the same words.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.core
from typer._coercion import build_runtime_param
from typer._param_types import lenient_issubclass

from openbell.ops import cli
from openbell.ops.cli.quick_params import QuickParam


def commands() -> list[tuple[str, Any]]:
    """Every command and group of the app, the root included, with its path."""
    found: list[tuple[str, Any]] = []

    def walk(command: Any, path: str) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(cli.app), "")
    return found


def parameters() -> list[tuple[str, Any, Any]]:
    """(id, command, parameter) for every parameter typer coerces, help options included."""
    found = []
    for path, command in commands():
        context = typer.Context(command, help_option_names=["-h", "--help"])
        for param in command.get_params(context):
            if isinstance(param, typer.core._TyperParameter):
                found.append((f"{path or 'openbell'} {param.name}", command, param))
    return found


def samples(annotation: Any, tmp_path: Path) -> list[Any]:
    """Values of every kind a parameter of `annotation` may be given (or default to)."""
    existing = tmp_path / "file.toml"
    existing.write_text("")
    common: list[Any] = [None, "", "x", 0, 1, True, (), ("a", "b")]
    paths = [str(existing), existing, str(tmp_path), tmp_path, str(tmp_path / "missing"), "-"]
    dates = ["2025-11-03", "2025-11-03T10:00:00", "2025-11-03 10:00", "2025-13-45", " 2025-11-03"]
    numbers = ["5", " 5", "abc", -1, 0, 1, 5, 99, 100, 101, 10**6, 2.5]
    extra: list[Any] = [*paths, *dates, *numbers]
    if lenient_issubclass(annotation, Enum):
        members = list(annotation)
        names = [str(member.value) for member in members]
        extra += [*members, *names, *(name.upper() for name in names), "nope", members[0].name]
    if annotation is datetime:
        extra.append(datetime(2025, 11, 3))  # noqa: DTZ001 (typer's values are naive)
    return common + extra


def outcome(coerce: Any, value: Any, param: Any, context: Any) -> tuple[str, Any]:
    try:
        result = coerce(value, param=param, ctx=context)
    except Exception as exc:  # noqa: BLE001 (compared: same class, same words)
        message = exc.format_message() if isinstance(exc, typer.TyperException) else str(exc)
        return (type(exc).__name__, message)
    return (type(result).__name__, result)


@pytest.mark.parametrize(
    ("command", "param"),
    [(command, param) for _, command, param in parameters()],
    ids=[name for name, _, _ in parameters()],
)
def test_a_value_is_taken_as_typers_adapter_takes_it(
    command: Any, param: Any, tmp_path: Path
) -> None:
    context = typer.Context(command)
    descriptor = param.type_descriptor
    if descriptor.file_annotation is not None:
        pytest.skip("a file parameter keeps typer's own coercion")
    kept = param._runtime_param  # a value left to typer's adapter replaces it on the parameter
    try:
        for value in samples(descriptor.annotation, tmp_path):
            quick = QuickParam(
                annotation=descriptor.annotation,
                parameter_info=descriptor.parameter_info,
                descriptor=descriptor,
            )
            typer_own = build_runtime_param(descriptor)
            assert outcome(quick.coerce, value, param, context) == outcome(
                typer_own.coerce, value, param, context
            ), value
    finally:
        param._runtime_param = kept


def test_every_parameter_and_help_option_coerces_without_typers_adapter() -> None:
    for name, _, param in parameters():
        if param.type_descriptor.file_annotation is None:
            assert isinstance(param._runtime_param, QuickParam), name
