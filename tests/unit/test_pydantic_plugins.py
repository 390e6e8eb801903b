"""The `openbell` command loads no pydantic plugin (`ops/entry.py`, `PydanticWithoutPlugins`): a
package installed beside openbell that registers one under the `pydantic` entry point group would
be handed every value pydantic validates (the config with its keys, agents' tool arguments). Plain
pydantic imports such a plugin at its first model; `openbell` never imports it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openbell_testkit.cli import TIMEOUT_S, clean_env, openbell_command

#: A pydantic plugin that marks the file `$PLUGIN_MARK` as soon as it is imported.
_PLUGIN = """
import os
import pathlib

pathlib.Path(os.environ["PLUGIN_MARK"]).write_text("imported")


class Plugin:
    def new_schema_validator(self, *args, **kwargs):
        return None, None, None


plugin = Plugin()
"""

_CONFIG = """
[store]
url = "sqlite:///{db}"

[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "ccxt:binance"
initial_cash = "10000"

[[agents]]
name = "buy-and-hold"
kind = "buy_and_hold"
markets = ["crypto"]
"""


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    """An environment in which a pydantic plugin is installed (a folder on `PYTHONPATH` with the
    plugin's module and its dist-info) and marks `tmp_path / "mark"` when imported."""
    site = tmp_path / "site"
    dist = site / "spy_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "spy_plugin.py").write_text(_PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: spy-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nspy = spy_plugin:plugin\n")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return clean_env(PYTHONPATH=path, PLUGIN_MARK=str(tmp_path / "mark"))


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> None:
    result = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    assert result.returncode == 0, result.stderr


def test_plain_pydantic_imports_the_plugin(plugin_env: dict[str, str], tmp_path: Path) -> None:
    model = "from pydantic import BaseModel\nclass Model(BaseModel):\n    x: int\n"
    _run([sys.executable, "-c", model], plugin_env, tmp_path)
    assert (tmp_path / "mark").read_text() == "imported"


def test_openbell_never_imports_a_pydantic_plugin(
    plugin_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "openbell.toml"
    config.write_text(_CONFIG.format(db=(tmp_path / "ledger.db").as_posix()))
    _run([*openbell_command(), "--config", str(config), "config", "check"], plugin_env, tmp_path)
    _run([*openbell_command(), "--config", str(config), "db", "upgrade"], plugin_env, tmp_path)
    assert (tmp_path / "ledger.db").exists()  # the commands ran, their models validated
    assert not (tmp_path / "mark").exists()
