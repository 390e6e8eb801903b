"""Turning a pydantic `ValidationError` on a config file into lines an operator can act on.

This module owns the wording of config errors: one line per problem, the key path in TOML terms
(`markets.us.cadence`, `agents[1].api_key_env`, without pydantic's union tags), "unknown key" with
a "did you mean" hint, plain words for type errors, and `PathError`, which a validator raises to
point below the field it validates (a list index, a nested key); `PathErrors` carries several, so a
validator that checks many things reports each of them. Input values are never repeated: one may
be a secret.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

Loc = tuple[str | int, ...]

_PLAIN_WORDS = {
    "missing": "missing required key",
    "model_type": "should be a table",
    "model_attributes_type": "should be a table",
    "dict_type": "should be a table",
    "tuple_type": "should be a list",
    "list_type": "should be a list",
}


class PathError(ValueError):
    """A validation failure at `path` below the validated field or model."""

    def __init__(self, path: Loc, message: str) -> None:
        super().__init__(message)
        self.path = path


class PathErrors(ValueError):
    """Several validation failures found by one validator, each at its own path."""

    def __init__(self, errors: Sequence[PathError]) -> None:
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = tuple(errors)


def raise_all(errors: Sequence[PathError]) -> None:
    """Raise the one error of `errors`, or all of them as `PathErrors`; nothing when empty."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise PathErrors(errors)


class ErrorDescriber:
    """Describes validation errors of `root`, whose list `tagged_list` holds a tagged union.

    `tags` maps each union tag (the `kind` value) to its model; `tag_only_keys` maps a key that
    only some kinds accept to a hint naming them.
    """

    def __init__(
        self,
        root: type[BaseModel],
        *,
        tagged_list: str,
        tag_key: str,
        tags: Mapping[str, type[BaseModel]],
        tag_only_keys: Mapping[str, str],
    ) -> None:
        self._root = root
        self._tagged_list = tagged_list
        self._tag_key = tag_key
        self._tags = tags
        self._tag_only_keys = tag_only_keys

    def describe(self, exc: ValidationError) -> str:
        """One line for the most telling error of `exc` (`key.path: what is wrong`), saying how
        many more there are."""
        lines = self.describe_all(exc)
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        return lines[0] + more

    def describe_all(self, exc: ValidationError) -> list[str]:
        """One line per error of `exc` (`key.path: what is wrong`), the most telling first."""
        # An unknown key first: a typo'd key usually also causes a "missing required key".
        errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")
        return [" ".join(line.split()) for error in errors for line in self._describe(error)]

    def _describe(self, error: ErrorDetails) -> list[str]:
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, PathErrors):
            return [self._describe_one(error, each) for each in cause.errors]
        return [self._describe_one(error, cause)]

    def _describe_one(self, error: ErrorDetails, cause: object) -> str:
        raw_loc: Loc = tuple(error["loc"])
        loc = self._strip_union_tag(raw_loc)
        kind = error["type"]
        message = _PLAIN_WORDS.get(kind, error["msg"])
        if isinstance(cause, ValueError):
            message = str(cause)
            if isinstance(cause, PathError):
                loc += cause.path
        elif kind == "extra_forbidden":
            message = self._unknown_key(raw_loc)
        elif kind == "union_tag_not_found":
            loc += (self._tag_key,)
            message = "missing required key"
        elif kind == "union_tag_invalid":
            loc += (self._tag_key,)
            message = "should be one of " + ", ".join(repr(tag) for tag in self._tags)
        path = render_path(loc)
        return f"{path}: {message}" if path else message

    def _strip_union_tag(self, loc: Loc) -> Loc:
        # A discriminated union puts the matched tag in the location: agents.0.llm.model.
        if (
            len(loc) > 2
            and loc[0] == self._tagged_list
            and isinstance(loc[1], int)
            and loc[2] in self._tags
        ):
            return loc[:2] + loc[3:]
        return loc

    def _unknown_key(self, raw_loc: Loc) -> str:
        key = str(raw_loc[-1])
        if raw_loc[:1] == (self._tagged_list,) and key in self._tag_only_keys:
            return f"unknown key ({self._tag_only_keys[key]})"
        close = difflib.get_close_matches(key, self._keys_of(raw_loc[:-1]), n=1)
        return f"unknown key (did you mean {close[0]!r}?)" if close else "unknown key"

    def _keys_of(self, loc: Loc) -> list[str]:
        """The keys the table at `loc` accepts (for "did you mean" hints)."""
        model = self._root
        for part in loc:
            if isinstance(part, int):
                continue
            if part in self._tags and part not in model.model_fields:
                model = self._tags[part]
                continue
            field = model.model_fields.get(part)
            found = _first_model(field.annotation) if field is not None else None
            if found is None:
                return []
            model = found
        return list(model.model_fields)


def render_path(loc: Iterable[str | int]) -> str:
    """`("agents", 1, "markets", 0)` as `agents[1].markets[0]`."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def _first_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if arg is Ellipsis or arg is types.NoneType:
            continue
        found = _first_model(arg)
        if found is not None:
            return found
    return None
