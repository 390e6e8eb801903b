"""The I/O and escape rules of the static check: what strategy code may not name.

This module owns `escapes(tree)`, which yields `(line, rule, message)` for every import outside
`ALLOWED_IMPORTS`; every name in `FORBIDDEN_NAMES` or starting with `_`; every attribute in
`FORBIDDEN_ATTRIBUTES`, starting with `_`, or starting with one of `FRAME_PREFIXES` (the
attributes of frames, code objects, generators, coroutines and tracebacks: `gi_frame`, `f_back`,
`f_globals`, `f_builtins`, `tb_frame`, `co_consts`, ..., the road from a generator up to the
child's own frame and its real builtins); every string holding `__`, a forbidden attribute or a
frame attribute (`"{0.gi_frame}".format(g)` reads attributes named in a string); `async`,
`global`/`nonlocal`, classes and `match`; and a function given to `agg`, `aggregate`, `apply`,
`transform` or `pipe` that the check cannot see (pandas looks a string up with `getattr`, so a
name built at run time reaches any attribute). These rules are the second wall: the OS sandbox
(`sandbox.py`) is the first.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Final

#: The only modules strategy code may import (and their public attributes).
ALLOWED_IMPORTS: Final = frozenset({"pandas", "numpy", "math", "statistics"})
FORBIDDEN_NAMES: Final = frozenset(
    {
        "open", "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr",
        "hasattr", "globals", "locals", "vars", "dir", "input", "breakpoint", "help", "exit",
        "quit", "memoryview", "__builtins__", "object", "super", "classmethod", "staticmethod",
        "property", "type",
    }
)  # fmt: skip
FORBIDDEN_ATTRIBUTES: Final = frozenset(
    {
        # modules reachable from pandas/numpy internals, and process control
        "os", "sys", "subprocess", "io", "builtins", "importlib", "ctypes", "socket", "shutil",
        "pathlib", "Path", "system", "popen", "spawn", "fork", "kill", "core", "lib", "util",
        "testing", "distutils", "f2py", "ctypeslib", "compat", "errors", "plotting", "options",
        "set_option", "config", "resource", "signal", "threading", "multiprocessing", "api",
        "indexers",
        # evaluation of text, and attributes read by a name in a string
        "eval", "query", "exec", "compile", "format", "format_map",
        # file and network I/O of pandas and numpy
        "to_csv", "to_pickle", "to_parquet", "to_feather", "to_hdf", "to_sql", "to_excel",
        "to_json", "to_html", "to_latex", "to_markdown", "to_stata", "to_orc", "to_xml",
        "to_clipboard", "to_gbq", "read_csv", "read_pickle", "read_parquet", "read_feather",
        "read_hdf", "read_sql", "read_sql_query", "read_sql_table", "read_excel", "read_json",
        "read_html", "read_table", "read_fwf", "read_clipboard", "read_stata", "read_sas",
        "read_spss", "read_orc", "read_xml", "read_gbq", "HDFStore", "ExcelWriter", "ExcelFile",
        "to_iceberg", "to_xarray", "to_string", "style", "from_custom_template", "show_versions",
        "plot", "hist", "boxplot", "savefig",
        "save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt",
        "fromfile", "tofile", "memmap", "fromregex", "DataSource", "dump", "dumps",
        "open_memmap",
    }
)  # fmt: skip
#: Attributes of frames (f_), code objects (co_), generators (gi_), coroutines (cr_), async
#: generators (ag_) and tracebacks (tb_). No pandas, numpy, math or statistics name starts so.
FRAME_PREFIXES: Final = ("f_", "co_", "gi_", "cr_", "ag_", "tb_")
_FRAME_TOKEN: Final = re.compile(r"(?<![A-Za-z0-9])(?:f|co|gi|cr|ag|tb)_[A-Za-z]")
#: Methods that take a function, and look a string up as an attribute of their receiver.
FUNCTION_TAKERS: Final = frozenset({"agg", "aggregate", "apply", "transform", "pipe"})
#: Builtins the sandbox gives strategy code that may be passed as a function.
_BUILTIN_FUNCTIONS: Final = frozenset(
    {"abs", "all", "any", "bool", "float", "int", "len", "list", "max", "min", "round", "set",
     "sorted", "str", "sum", "tuple"}
)  # fmt: skip


def escapes(tree: ast.Module) -> Iterator[tuple[int, str, str]]:
    """(line, rule, message) for every road out of the sandbox in `tree`."""
    defined = _defined_functions(tree)
    modules = set(imports(tree))
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 1)
        if isinstance(node, ast.Import | ast.ImportFrom):
            for rule, message in _imports(node):
                yield line, rule, message
            continue
        found = _escape(node)
        if found is not None:
            yield line, *found
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in FUNCTION_TAKERS
        ):
            message = (
                f"the function given to .{node.func.attr}() must be written in the code "
                "(a lambda, a def, np.<name> or a string literal)"
            )
            for part in _function_arguments(node, node.func.attr):
                if not _seen_function(part, defined, modules):
                    yield line, "io", message


def _escape(node: ast.AST) -> tuple[str, str] | None:
    """(rule, message) when `node` is an escape from the sandbox's rules, else None."""
    if isinstance(node, ast.AsyncFunctionDef | ast.Await | ast.AsyncFor | ast.AsyncWith):
        return "async", "async code is not allowed"
    if isinstance(node, ast.Global | ast.Nonlocal):
        return "scope", "global/nonlocal is not allowed"
    if isinstance(node, ast.ClassDef | ast.Match):
        return "scope", "classes and match statements are not allowed"
    name: str | None = None
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.FunctionDef):
        name = node.name
    elif isinstance(node, ast.arg):
        name = node.arg
    if name is not None and (name in FORBIDDEN_NAMES or name.startswith("_")):
        return "io", f"the name {name!r} is forbidden"
    if isinstance(node, ast.Attribute) and (
        node.attr in FORBIDDEN_ATTRIBUTES or node.attr.startswith(("_", "read_", *FRAME_PREFIXES))
    ):
        return "io", f"the attribute .{node.attr} is forbidden"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        if "__" in text or text in FORBIDDEN_ATTRIBUTES or _FRAME_TOKEN.search(text):
            return "io", f"the string {text[:40]!r} is forbidden"
    return None


def _imports(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str]]:
    if isinstance(node, ast.ImportFrom):
        modules = [node.module or ""] if node.level == 0 else ["." * node.level]
        imported = [alias.name for alias in node.names]
    else:
        modules = [alias.name for alias in node.names]
        imported = []
    for module in modules:
        if module not in ALLOWED_IMPORTS:
            allowed = ", ".join(sorted(ALLOWED_IMPORTS))
            yield "import", f"import of {module!r}; allowed: {allowed}"
    for name in imported:
        if name == "*" or name.startswith(("_", *FRAME_PREFIXES)) or name in FORBIDDEN_ATTRIBUTES:
            yield "import", f"import of {name!r}"
    for alias in node.names:
        if alias.asname is not None and alias.asname.startswith("_"):
            yield "import", f"alias {alias.asname!r}"


def _function_arguments(call: ast.Call, method: str) -> Iterator[ast.expr]:
    """The function argument(s) of x.agg(f), ...: the first positional, `func=`, and every
    keyword of a named aggregation."""
    if call.args:
        yield call.args[0]
    for keyword in call.keywords:
        if keyword.arg in ("func", "arg") or keyword.arg is None or method in ("agg", "aggregate"):
            yield keyword.value


def _seen_function(node: ast.expr, defined: set[str], modules: set[str]) -> bool:
    """A lambda, a function defined in the code, a builtin, `np.<name>`, a string literal, or
    a list, tuple or dict of these (a named aggregation: `("close", "max")`)."""
    if isinstance(node, ast.Lambda):
        return True
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Name):
        return node.id in defined or node.id in _BUILTIN_FUNCTIONS or node.id in modules
    if isinstance(node, ast.Attribute):
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id in modules
    if isinstance(node, ast.List | ast.Tuple):
        return all(_seen_function(part, defined, modules) for part in node.elts)
    if isinstance(node, ast.Dict):
        return all(_seen_function(part, defined, modules) for part in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):  # pd.NamedAgg(...)
        parts = [*node.args, *(keyword.value for keyword in node.keywords)]
        return node.func.attr == "NamedAgg" and all(
            _seen_function(part, defined, modules) for part in parts
        )
    return False


def _defined_functions(tree: ast.Module) -> set[str]:
    names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def imports(tree: ast.Module) -> dict[str, str]:
    """What each name the module's imports bind stands for: `np` -> "numpy", `mean` ->
    "statistics.mean" (a name without a dot is a module)."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[(alias.asname or alias.name).split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found
