"""Opening the ledger database: engines for SQLite and Postgres, and the schema-version check.

`make_engine` turns the configured `[store] url` into a SQLAlchemy engine, refusing anything but
SQLite and Postgres with a one-line `ConfigError`. SQLite gets its parent directory created,
foreign keys enforced, WAL journaling, a busy timeout and an explicit `BEGIN` (a write transaction
may ask for `BEGIN IMMEDIATE` with the `SQLITE_IMMEDIATE` execution option); `postgresql://` URLs
use psycopg 3. The engine is the store's write boundary for secrets: every text parameter of every
statement it runs (also each text in an array parameter) passes through `Redactor.mask_values`
with the configured secrets and the URL's own password (`redact.py`), and openbell's own tokens,
so no table, present or future, can store one. Numbers and instants sent as text (exact decimals,
SQLite timestamps) are left as they are. The parameters of a statement or batch are first scanned
together (`Redactor.may_mask`), and masked one by one only when something may be there.
Postgres connections are made within a connect timeout (the URL's libpq `connect_timeout`, else
`DEFAULT_CONNECT_TIMEOUT_S`) so that a server that accepts connections but never answers ends in a
one-line error instead of a hang, optionally with a statement timeout (what the one-shot commands
ask for, from `[store] statement_timeout_s`). A `read_only` engine (`openbell serve`) cannot write:
SQLite opens the file `mode=ro` with `query_only`, Postgres sessions are read-only by default.
`ledger_address` says how another process opens an engine's ledger again, read-only, with the
same masking and statement timeout (the web's view worker, `ops.web.view_worker`).
`check_schema` refuses to run on a database whose migrations are not at this version's head; it
reads the migration scripts and Alembic's version table directly, without importing Alembic.
"""

from __future__ import annotations

import ast
import functools
import re
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from openbell.markets.errors import ConfigError, DatabaseDamaged, SchemaError
from openbell.store.redact import Redactor

#: The Alembic migrations' scripts, and the table in which Alembic records a database's revision.
VERSIONS_DIR = Path(__file__).resolve().parent / "migrations" / "versions"
VERSION_TABLE = "alembic_version"
SQLITE_BUSY_TIMEOUT_MS = 5000
#: How long a Postgres connection may take to be made when the URL sets no `connect_timeout`.
DEFAULT_CONNECT_TIMEOUT_S = 10
#: Execution option: on SQLite, begin the transaction with the write lock (`BEGIN IMMEDIATE`).
SQLITE_IMMEDIATE = "openbell_sqlite_immediate"
#: Execution option of a statement run through the driver (`replay_batch.insert_rows`): the
#: positions (or names) of its parameters that may hold text, each row's or each array's; the
#: others are bound from typed columns (exact decimals, instants, integers, booleans), which hold
#: no secret, so the scan for anything to mask leaves them out. Without it every parameter is
#: scanned.
TEXT_PARAMETERS = "openbell_text_parameters"
#: Key of a DBAPI connection's `info`: how many statements it ran whose text parameters may have
#: been masked (`masked_statements`).
_MASKED = "openbell_masked_statements"
_POSTGRES_DRIVERS = frozenset({"postgresql", "postgresql+psycopg"})
#: Text that is an exact decimal or a SQLite timestamp: a stored value, never masked.
_EXACT_VALUE: Final = re.compile(
    r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?"
)


def parse_url(url: str) -> URL:
    """Parse and normalise a store URL, or raise `ConfigError` naming what is wrong."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(
            f"store url {url!r} is not a database URL; use sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB"
        ) from exc
    if parsed.drivername in {"sqlite", "sqlite+pysqlite"}:
        return parsed
    if parsed.drivername in _POSTGRES_DRIVERS:
        return parsed.set(drivername="postgresql+psycopg")
    raise ConfigError(
        f"store url {parsed.render_as_string(hide_password=True)!r}: unsupported database "
        f"{parsed.drivername!r}; use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
    )


def make_engine(
    url: str,
    *,
    redactor: Redactor | None = None,
    statement_timeout_s: float | None = None,
    read_only: bool = False,
) -> Engine:
    """Create an engine for the ledger at `url` (SQLite file or Postgres) that masks the secrets
    of `redactor`, the URL's password and openbell's tokens in every text it writes.

    On Postgres every connection is made within the URL's `connect_timeout` (seconds; default
    `DEFAULT_CONNECT_TIMEOUT_S`), and with `statement_timeout_s` (None or 0: no limit) the server
    cancels any statement that runs longer. `read_only` engines cannot write: SQLite opens the
    file with `mode=ro` (an existing file only) and `query_only`, Postgres sessions start with
    `default_transaction_read_only`. Raises `ConfigError` for a malformed or unsupported URL.
    Connecting is lazy: an unreachable server shows up on first use.
    """
    parsed = parse_url(url)
    try:
        if parsed.get_backend_name() == "sqlite":
            engine = _sqlite_engine(parsed, read_only=read_only)
        else:
            engine = create_engine(parsed, pool_pre_ping=True)
            connect = _PostgresConnect(parsed, statement_timeout_s, read_only=read_only)
            event.listen(engine, "do_connect", connect)
    except (ArgumentError, NoSuchModuleError, TypeError) as exc:
        shown = parsed.render_as_string(hide_password=True)
        raise ConfigError(f"store url {shown!r}: {exc}") from exc
    masking = (redactor or Redactor()).with_secrets([parsed.password])
    event.listen(engine, "before_cursor_execute", _ParameterMasker(masking), retval=True)
    _ADDRESSES[engine] = LedgerAddress(
        url=url, redactor=redactor or Redactor(), statement_timeout_s=statement_timeout_s
    )
    return engine


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerAddress:
    """What `make_engine` made an engine from, to open the same ledger in another process (it
    pickles; its `repr` shows neither the URL, which may hold a password, nor the secrets)."""

    url: str = field(repr=False)
    redactor: Redactor = field(repr=False)
    statement_timeout_s: float | None

    def open_read_only(self) -> Engine:
        """A read-only engine on the ledger (`make_engine(..., read_only=True)`), masking as
        the original does."""
        return make_engine(
            self.url,
            redactor=self.redactor,
            statement_timeout_s=self.statement_timeout_s,
            read_only=True,
        )


_ADDRESSES: weakref.WeakKeyDictionary[Engine, LedgerAddress] = weakref.WeakKeyDictionary()


def ledger_address(engine: Engine) -> LedgerAddress:
    """How `engine` was made (`ValueError` for an engine `make_engine` did not make)."""
    try:
        return _ADDRESSES[engine]
    except KeyError:
        raise ValueError("the engine was not made by store.db.make_engine") from None


def masked_statements(connection: Connection) -> int:
    """How many statements `connection` (its DBAPI connection, over its life) ran with text
    parameters that may have been masked: a writer that compares it before and after its writes
    knows whether the rows it wrote are stored as it holds them."""
    count: int = connection.info.get(_MASKED, 0)
    return count


class _ParameterMasker:
    """`before_cursor_execute` hook: the statement with its text parameters masked, together (a
    secret cut into pieces across a statement's texts is masked too: `Redactor.mask_together`)."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor

    def __call__(
        self,
        _connection: Connection,
        _cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> tuple[str, Any]:
        keys = None if context is None else context.execution_options.get(TEXT_PARAMETERS)
        rows = parameters if executemany and isinstance(parameters, Sequence) else [parameters]
        if not self._may_mask(rows, keys):
            return statement, parameters
        _connection.info[_MASKED] = _connection.info.get(_MASKED, 0) + 1
        texts: list[str] = []
        for row in rows:
            _collect(row, texts)
        masked = iter(self._redactor.mask_together(texts))
        shown = [_rebuilt(row, masked) for row in rows]
        return statement, shown if rows is parameters else shown[0]

    def _may_mask(self, rows: Sequence[Any], keys: Sequence[Any] | None = None) -> bool:
        """Whether any text parameter of `rows` could be masked: one scan of them all, joined
        (each text is in the joined one, so whatever would be masked in it is found there; a
        match across two texts only costs the masking pass), for a batch of many rows that
        (nearly always) holds nothing to mask. With `keys` (`TEXT_PARAMETERS`), only those
        parameters of each row are scanned."""
        if keys is not None:  # one row of every row's text parameters
            rows = [[row[key] for key in keys for row in rows]]
        texts: list[str] = []
        for row in rows:
            if isinstance(row, Mapping):
                values: Any = row.values()
            elif isinstance(row, list | tuple):
                values = row
            else:
                continue
            texts.extend([value for value in values if isinstance(value, str)])
            for array in [value for value in values if isinstance(value, list | tuple)]:
                texts.extend([value for value in array if isinstance(value, str)])
        return self._redactor.may_mask("\x00".join(texts))


def _maskable(value: Any) -> bool:
    """Whether `value` is a text that may be masked (an exact decimal or a timestamp sent as
    text is a stored value, never masked)."""
    return isinstance(value, str) and not _EXACT_VALUE.fullmatch(value)


def _collect(value: Any, texts: list[str]) -> None:
    """Append the maskable texts of a row (or of an array parameter) to `texts`, in order."""
    if isinstance(value, Mapping):
        for item in value.values():
            _collect(item, texts)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, texts)
    elif _maskable(value):
        texts.append(value)


def _rebuilt(value: Any, masked: Iterator[str]) -> Any:
    """`value` with its maskable texts replaced, in `_collect`'s order, by `masked`'s."""
    if isinstance(value, Mapping):
        return {key: _rebuilt(item, masked) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_rebuilt(item, masked) for item in value)
    return next(masked) if _maskable(value) else value


class _PostgresConnect:
    """Makes each Postgres connection: sets the connect timeout (unless the URL does) and the
    statement timeout, and names the server in a connect timeout's message."""

    def __init__(
        self, url: URL, statement_timeout_s: float | None, *, read_only: bool = False
    ) -> None:
        self.shown = url.render_as_string(hide_password=True)
        self.options = []
        if statement_timeout_s:
            self.options.append(f"-c statement_timeout={round(statement_timeout_s * 1000)}")
        if read_only:
            self.options.append("-c default_transaction_read_only=on")

    def __call__(self, dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        cparams.setdefault("connect_timeout", DEFAULT_CONNECT_TIMEOUT_S)
        if self.options:
            cparams["options"] = " ".join([cparams.get("options", ""), *self.options]).strip()
        import psycopg  # here, not at the top: a SQLite ledger has no use for it

        try:
            return dialect.loaded_dbapi.connect(*cargs, **cparams)
        except psycopg.errors.ConnectionTimeout as exc:
            raise psycopg.errors.ConnectionTimeout(
                f"{self.shown}: no answer within {cparams['connect_timeout']} s "
                "(connect_timeout; set it in the store url to wait longer)"
            ) from exc


def _sqlite_engine(url: URL, *, read_only: bool = False) -> Engine:
    database = url.database
    if read_only:
        return _read_only_sqlite_engine(url)
    if database and database != ":memory:" and not database.startswith("file:"):
        try:
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"store url {url.render_as_string()!r}: cannot create the directory of "
                f"{database}: {exc.strerror}"
            ) from exc
    engine = create_engine(url)
    event.listen(engine, "connect", _configure_sqlite)
    event.listen(engine, "begin", _begin_sqlite)
    return engine


def _read_only_sqlite_engine(url: URL) -> Engine:
    """An engine that opens the existing file `mode=ro`, each connection `query_only`."""
    database = url.database or ""
    if not database or database == ":memory:" or database.startswith("file:"):
        raise ConfigError(f"store url {url.render_as_string()!r}: a read-only ledger is a file")
    path = Path(database).expanduser().resolve()
    target = f"file:{quote(path.as_posix())}?mode=ro"
    engine = create_engine(url.set(database=target, query={**url.query, "uri": "true"}))
    event.listen(engine, "connect", _configure_read_only_sqlite)
    event.listen(engine, "begin", _begin_sqlite)
    return engine


def _configure_read_only_sqlite(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA query_only = ON")
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    finally:
        cursor.close()


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control from pysqlite (which defers BEGIN until the first write, and so
    # can neither run DDL transactionally nor take the write lock up front): see `_begin_sqlite`.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL still never corrupts the file and survives a killed process; only an
        # OS crash or power loss can roll back the last commits. It saves an fsync per commit.
        cursor.execute("PRAGMA synchronous = NORMAL")
    finally:
        cursor.close()


def _begin_sqlite(connection: Connection) -> None:
    # A ledger write reads the balance it updates; on SQLite it must hold the write lock from the
    # start, or a concurrent writer makes it fail with "database is locked" instead of waiting.
    mode = "IMMEDIATE" if connection.get_execution_options().get(SQLITE_IMMEDIATE) else "DEFERRED"
    connection.exec_driver_sql(f"BEGIN {mode}")


def check_schema(engine: Engine) -> str:
    """Return the database's revision; raise `SchemaError` unless it is this version's head.

    It reads the migrations and the version table itself (`shipped_head`, `recorded_revision`)
    rather than through Alembic, whose import alone costs a command a quarter of a second.
    """
    head = shipped_head()
    current = recorded_revision(engine)
    if current == head:
        return head
    address = _ADDRESSES.get(engine)
    where = (
        shown_ledger(address.url)
        if address is not None
        else engine.url.render_as_string(hide_password=True)
    )
    state = "has no openbell schema" if current is None else f"is at schema revision {current}"
    raise SchemaError(
        f"database {where} {state}, this openbell expects {head}: run `openbell db upgrade`"
    )


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite store URL (None: Postgres, memory, or a `file:` URI)."""
    parsed = parse_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in {"", ":memory:"}:
        return None
    return None if database.startswith("file:") else Path(database).expanduser()


def shown_ledger(url: str) -> str:
    """How a person named the ledger at `url`: a SQLite file's path as written in the URL, any
    other URL without its password."""
    path = sqlite_file(url)
    if path is not None:
        return parse_url(url).database or str(path)
    return parse_url(url).render_as_string(hide_password=True)


def refuse_empty_file(url: str, remedy: str) -> None:
    """Raise `DatabaseDamaged` if `url` is a SQLite file that exists and is empty (0 bytes): not
    a ledger, and nothing openbell should adopt as one unless told (`remedy` says how)."""
    path = sqlite_file(url)
    if path is not None and path.is_file() and path.stat().st_size == 0:
        raise DatabaseDamaged(f"the file is empty (0 bytes), not an openbell ledger; {remedy}")


def shipped_head(versions: Path = VERSIONS_DIR) -> str:
    """The newest revision of the migrations in `versions` (what `alembic heads` names): the one
    no other migration revises, read from each file's `revision` and `down_revision`.

    Read once per state of the folder (its files' names, sizes and modification times): parsing
    the migrations takes about 12 ms, and a replay asks twice (`migrate.upgrade`, `check_schema`).
    """
    files = []
    for path in sorted(versions.glob("*.py")):
        status = path.stat()
        files.append((path.name, status.st_size, status.st_mtime_ns))
    return _head_of(versions, tuple(files))


@functools.lru_cache(maxsize=4)
def _head_of(versions: Path, files: tuple[tuple[str, int, int], ...]) -> str:
    """`shipped_head` of `versions`, holding `files` (name, size, modification time)."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for name, _, _ in files:
        path = versions / name
        values = _module_constants(path, ("revision", "down_revision"))
        if "revision" not in values:
            continue
        revisions.add(str(values["revision"]))
        down = values.get("down_revision")
        revised.update([down] if isinstance(down, str) else (down or ()))
    heads = sorted(revisions - revised)
    if len(heads) != 1:
        raise RuntimeError(f"migrations in {versions}: expected one head, found {heads}")
    return heads[0]


#: CPython 3.11's `ast.parse` is not safe in several threads at once ("AST constructor recursion
#: depth mismatch"): daemons started side by side in one process check their schema together.
_PARSING = threading.Lock()


def _module_constants(path: Path, names: Sequence[str]) -> dict[str, Any]:
    """The literal values assigned to `names` at the top level of the Python file at `path`,
    before its first function or class when they are all there (a migration's header: parsing
    the whole file took four fifths of `shipped_head`), else anywhere at its top level."""
    source = path.read_text(encoding="utf-8")
    header = re.split(r"^(?:async def|def|class|@)", source, maxsplit=1, flags=re.MULTILINE)[0]
    try:
        found = _constants_in(header, names)
    except SyntaxError:
        found = {}
    return found if len(found) == len(names) else _constants_in(source, names)


def _constants_in(source: str, names: Sequence[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    target: ast.expr
    with _PARSING:
        tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in names:
            found[target.id] = ast.literal_eval(value)
    return found


def recorded_revision(engine: Engine) -> str | None:
    """The revision Alembic recorded in the database's `alembic_version` table; None when the
    database was never migrated (no table, or no row). Several rows (branches, which openbell's
    migrations do not have) come back joined by commas, which is never the head."""
    with engine.connect() as connection:
        if not inspect(connection).has_table(VERSION_TABLE):
            return None
        rows = connection.execute(text("SELECT version_num FROM alembic_version")).scalars()
        found = sorted(str(row) for row in rows)
    return ",".join(found) or None
