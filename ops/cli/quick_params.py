"""Command-line values taken as typer takes them, without building typer's pydantic adapters.

typer (0.29) coerces the value of every parameter of the command it runs with a pydantic
`TypeAdapter` it builds for that parameter, and builds it even for a parameter left at None. The
first of those builds imports typer's adapters and the parts of pydantic they use, and each one
builds a validator, most of them for values that need no coercion (a `--db` path given as a string,
an option left at None, a market's name).

`QuickCommand` and `QuickGroup`, the command and group classes the command line declares
(`app.py`), give each of their parameters a `QuickParam` (`quicken`), which takes a value whose
coercion is plain as typer's adapter would, to the same value: None (as typer does before any
adapter), a string for a `str`, a member or a name of an `Enum` (typer's own choice matching), a
string for a `datetime` with `formats` (the first format that parses it), an int within its bounds
for an `int`, a string or a path for a `Path` (typer's own path checks). Any other value, or one
these refuse, goes to the adapter typer would have built, built then: the same values and the same
errors as before, whatever is given (`tests/unit/test_cli_quick_params.py` compares them for every
parameter of the command line).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Final

import typer.core
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_choice, coerce_cli_path, lenient_issubclass
from typer.models import ParameterInfo

#: What `_plain` returns for a value it leaves to typer's adapter.
_UNTAKEN: Final = object()


@dataclass(frozen=True)
class QuickParam(RuntimeParam):
    """A parameter's coercion: plain values taken here, the others by typer's adapter (module
    docstring), which then replaces this one on the parameter."""

    descriptor: TypeDescriptor

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        taken = _plain(self.annotation, self.parameter_info, value, param, ctx)
        if taken is not _UNTAKEN:
            return taken
        typer_own = build_runtime_param(self.descriptor)
        param._runtime_param = typer_own
        return typer_own._coerce_value(value, param=param, ctx=ctx)


def quicken(params: Iterable[Any]) -> None:
    """Give each of typer's parameters in `params` a `QuickParam`, unless it opens files (typer's
    own coercion then) or already coerced a value."""
    for param in params:
        if not isinstance(param, typer.core._TyperParameter) or param._runtime_param is not None:
            continue
        descriptor = param.type_descriptor
        if descriptor.file_annotation is None:
            param._runtime_param = QuickParam(
                annotation=descriptor.annotation,
                parameter_info=descriptor.parameter_info,
                descriptor=descriptor,
            )


class QuickCommand(typer.core.TyperCommand):
    """typer's command whose parameters, its help option too, are `quicken`ed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        quicken(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # made when first asked for, with ctx's names
        quicken([option])
        return option


class QuickGroup(typer.core.TyperGroup):
    """typer's group whose own parameters, its help option too, are `quicken`ed (its commands are
    `QuickCommand`s when declared so)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        quicken(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        quicken([option])
        return option


def _plain(annotation: Any, info: ParameterInfo, value: Any, param: Any, ctx: Any) -> Any:
    """`value` coerced as typer's adapter for `annotation` would, or `_UNTAKEN`."""
    if info.parser is not None:
        return _UNTAKEN
    if annotation is str:
        return value if type(value) is str else _UNTAKEN
    if lenient_issubclass(annotation, Enum):
        try:
            return coerce_cli_choice(
                value, choices=list(annotation), case_sensitive=info.case_sensitive, ctx=ctx
            )
        except ValueError:
            return _UNTAKEN
    if annotation is datetime:
        return _datetime(value, info.formats)
    if annotation is int:
        return _int(value, info)
    if lenient_issubclass(annotation, Path) and info.path_type is None:
        return _path(annotation, info, value, param, ctx)
    return _UNTAKEN


def _datetime(value: Any, formats: Any) -> Any:
    if formats is None or type(value) is not str:
        return _UNTAKEN
    for format in formats:
        try:
            return datetime.strptime(value, format)  # noqa: DTZ007 (typer's parse, naive)
        except ValueError:
            continue
    return _UNTAKEN


def _int(value: Any, info: ParameterInfo) -> Any:
    if type(value) is not int or info.clamp:
        return _UNTAKEN
    below = info.min is not None and value < info.min
    above = info.max is not None and value > info.max
    return _UNTAKEN if below or above else value


def _path(annotation: type[Path], info: ParameterInfo, value: Any, param: Any, ctx: Any) -> Any:
    if type(value) is str:
        value = annotation(value)  # what pydantic makes of a string for a path
    elif not isinstance(value, annotation):
        return _UNTAKEN
    try:
        return coerce_cli_path(value, info, path_type=annotation, param=param, ctx=ctx)
    except Exception:  # noqa: BLE001 (refused: typer's adapter says how, in its own words)
        return _UNTAKEN
