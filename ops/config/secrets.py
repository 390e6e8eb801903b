"""The secrets a configuration names, and keeping them out of everything the process prints.

This module owns the list of secret values an `openbell.toml` brings into the process
(`configured_secrets`): the key of every LLM agent (the value of the variable its `api_key_env`
names, when it is set), the password of the store URL, the HTTP read token (`[http]
read_token_env`) and, for a Postgres store, libpq's `PGPASSWORD` when it is set (the way the docs
suggest to keep the password out of the file); bearer
tokens the process holds are
added by whoever holds them (`redactor_for(..., extra=...)`). `redactor_for` builds the one
`Redactor` (`store/redact.py`) of those values, which the plans hand to the store's engine.

It also holds the redactor of the running command (`activate`, `current`): the log processor
(`ops.logs.rendering`), the CLI's error line, the files `export` writes (`masked_rows`) and
`MaskedStream`, which the CLI puts around stdout and stderr for the length of a command, mask with
it, so nothing the process prints can show a configured secret. `activate` warns
(`secret_too_short_to_mask`, naming where the secret comes from, never its value) about a secret
shorter than `MIN_SECRET_CHARS`, which cannot be masked by value. openbell's own tokens (`obt_...`,
`obc_...`) are masked too; `show_once` is the one way past the masking, for the token
`openbell agent token` shows its owner once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from openbell.store.redact import MIN_SECRET_CHARS, Redactor

if TYPE_CHECKING:
    from openbell.ops.config.schema import OpenbellConfig
    from openbell.store.exports import Cell

# The command line wraps its output in `masked_output` before it knows the command: this module
# imports the config, the store and structlog only when a config's secrets are read, so that
# `openbell --help` does not pay for them.


@dataclass(frozen=True, slots=True)
class NamedSecret:
    """A secret value and where it comes from (`env OPENAI_API_KEY`, `store url password`)."""

    source: str
    value: str = field(repr=False)


def configured_secrets(config: OpenbellConfig, environ: Mapping[str, str]) -> list[NamedSecret]:
    """The secret values `config` brings in: agents' and judges' keys (when their variable is
    set), the store URL's password, for a Postgres store `PGPASSWORD`, and the HTTP read token
    (each when its variable is set)."""
    from openbell.ops.config.schema import (
        LlmAgentConfig,
        RatingAgentConfig,
        RatingJudgeConfig,
        StrategyCodeAgentConfig,
    )
    from openbell.store.db import parse_url

    found: list[NamedSecret] = []
    keyed = [
        agent
        for agent in config.agents
        if isinstance(agent, LlmAgentConfig | StrategyCodeAgentConfig | RatingAgentConfig)
    ]
    rating_judges = [
        agent.judge
        for agent in config.agents
        if isinstance(agent, RatingAgentConfig) and isinstance(agent.judge, RatingJudgeConfig)
    ]
    for endpoint in [*keyed, *rating_judges, *(config.judges or {}).values()]:
        name = endpoint.api_key_env
        if name is not None and environ.get(name, "").strip():
            found.append(NamedSecret(f"env {name}", environ[name]))
    url = parse_url(config.store.url)
    if url.password:
        found.append(NamedSecret("store url password", str(url.password)))
    if url.get_backend_name() == "postgresql" and environ.get("PGPASSWORD", "").strip():
        found.append(NamedSecret("env PGPASSWORD", environ["PGPASSWORD"]))
    token_env = config.http.read_token_env
    if token_env is not None and environ.get(token_env, "").strip():
        found.append(NamedSecret(f"env {token_env}", environ[token_env]))
    return found


def redactor_for(
    config: OpenbellConfig, environ: Mapping[str, str], *, extra: Iterable[str] = ()
) -> Redactor:
    """The redactor of every secret `config` names (and of `extra` values, such as tokens)."""
    return Redactor([secret.value for secret in configured_secrets(config, environ)]).with_secrets(
        extra
    )


@dataclass
class _Active:
    redactor: Redactor = field(default_factory=Redactor)


_active = _Active()


def activate(config: OpenbellConfig, environ: Mapping[str, str]) -> Redactor:
    """Make the redactor of `config` the one this process prints through; warn about any secret
    too short to be masked."""
    import structlog

    log = structlog.stdlib.get_logger(__name__)
    secrets = configured_secrets(config, environ)
    for secret in secrets:
        if len(secret.value) < MIN_SECRET_CHARS:
            log.warning(
                "secret_too_short_to_mask", source=secret.source, min_chars=MIN_SECRET_CHARS
            )
    _active.redactor = Redactor([secret.value for secret in secrets])
    return _active.redactor


def current() -> Redactor:
    """The redactor of the running command (no configured values before `activate`)."""
    return _active.redactor


def masked_rows(rows: Iterable[Sequence[Cell]]) -> Iterator[tuple[Cell, ...]]:
    """`rows` with the current secrets masked in their text cells (for files the CLI writes)."""
    mask = current().mask_values
    for row in rows:
        yield tuple(mask(cell) if isinstance(cell, str) else cell for cell in row)


class MaskedStream:
    """A text stream that writes every line to `target` with the current secrets masked.

    A line is written when it ends or when the stream is flushed, so a secret is masked whole
    even when it is written in pieces (a progress bar's partial line is flushed as it is drawn).
    """

    def __init__(self, target: TextIO) -> None:
        self._target = target
        self._pending = ""

    @property
    def target(self) -> TextIO:
        """The stream written to."""
        return self._target

    @property
    def encoding(self) -> str:
        return self._target.encoding

    @property
    def errors(self) -> str | None:
        return self._target.errors

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        if lines:
            mask = current().mask_values
            self._target.write("".join(mask(line) + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._target.write(current().mask_values(self._pending))
            self._pending = ""
        self._target.flush()

    def isatty(self) -> bool:
        return self._target.isatty()

    def fileno(self) -> int:
        return self._target.fileno()

    def writable(self) -> bool:
        return True


def show_once(secret: str, stream: TextIO) -> None:
    """Write `secret` and a newline to `stream` unmasked (past a `MaskedStream`, to its target):
    for a token its owner is shown once, and nothing else."""
    stream.flush()
    target = stream.target if isinstance(stream, MaskedStream) else stream
    target.write(secret + "\n")
    target.flush()


@contextmanager
def masked_output(stdout: TextIO, stderr: TextIO) -> Iterator[tuple[MaskedStream, MaskedStream]]:
    """`stdout` and `stderr` wrapped in `MaskedStream`s, flushed on exit."""
    out, err = MaskedStream(stdout), MaskedStream(stderr)
    try:
        yield out, err
    finally:
        for stream in (out, err):
            # Closed under us (a broken pipe): there is nothing more to say.
            with suppress(OSError, ValueError):
                stream.flush()
