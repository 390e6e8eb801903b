"""A fresh install is what runs, and the tutorials run as written on it.

The install: the tutorials' install block (`<!-- tutorial: setup -->`, the same on every page)
makes a new virtualenv (`.venv-run`) with openbell and its runtime dependencies (from the package
index, as `pip install .` does) and no development tool; it runs once, for both tests. The
wheel: `pip wheel` builds openbell from a copy of this checkout's files (what a clone has) with no
setuptools warning, and what the install put in its virtualenv is that wheel, file for file (its
RECORD); `openbell demo` runs from an empty directory outside the source tree on the data the
wheel bundles, importing the installed package.

The tutorials: each ```sh block of docs/tutorials/*.md runs as written, in order, in one shell,
in that copy: the install block as above, the rest in a network namespace of its own
(bubblewrap, `--unshare-net`), so its fixed port (8787) cannot meet another run's and the live
run of step 6 is the daemon without network the tutorial describes. A block marked
`background NAME HOST:PORT` is what the reader starts and leaves running: the script starts it,
waits until HOST:PORT answers, and stops it with SIGINT (the reader's Ctrl-C) at `stop NAME`,
which must end it with status 0. A block marked `fake-llm` needs `openbell fake-llm`: while the
install has no such command, those blocks are left out, every other block still runs, and the
test then says so by skipping at its end.

Both are slow: installing openbell's dependencies into a fresh virtualenv takes minutes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from openbell_testkit.jail import need_jail

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
#: Installing openbell's dependencies into a fresh virtualenv takes minutes on a busy machine.
INSTALL_TIMEOUT_S = 1800
TUTORIAL_TIMEOUT_S = 900
#: The development tools `make test` installs; a runtime install has none of them.
DEV_TOOLS = ("ruff", "mypy", "pytest", "playwright", "hypothesis", "import-linter", "mkdocs")
#: What setuptools prints when the packaging is ambiguous or wrong.
BUILD_WARNING = re.compile(r"(\w*Warning: |SetuptoolsDeprecationWarning|check\.warn\()")
#: The whole file system as it is, a network namespace of its own (only a loopback interface).
NETWORK_OF_ITS_OWN = ("bwrap", "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent")
MARKER = re.compile(r"<!-- tutorial: (.+?) -->")


def clean_env(home: Path) -> dict[str, str]:
    """The environment of a new user's shell: no virtualenv active, no PYTHONPATH, its own HOME
    (pip's configuration and cache are the machine's, as for any user)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"} and not key.startswith("PYTEST")
    }
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    env["HOME"] = str(home)
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    return env


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout's files (tracked, and new ones not ignored): what a clone has."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    target = tmp_path_factory.mktemp("clone") / "openbell"
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )


def setup_of(page: Path) -> str:
    """`page`'s install block (`<!-- tutorial: setup -->`) as one script."""
    return "\n".join(blocks_of(page, with_fake_llm=False).setup)


@pytest.fixture(scope="module")
def installed(clone: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The virtualenv the tutorials' install block makes in the clone (`.venv-run`: openbell and
    its runtime dependencies from the package index), made once: every tutorial shows the same
    block, and installing takes minutes."""
    setups = {setup_of(page) for page in TUTORIALS}
    assert len(setups) == 1, "the tutorials show different installs"
    (setup,) = setups
    assert setup, "the tutorials show their install"
    home = tmp_path_factory.mktemp("home")
    ran = run(["bash", "-euxc", setup], clone, clean_env(home))
    assert ran.returncode == 0, ran.stderr[-3000:]
    return clone / ".venv-run"


def record_of(dist_info: str, text: str) -> set[str]:
    """The files of the package a RECORD lists: not its `dist-info` folder's own (an install adds
    INSTALLER, REQUESTED and direct_url.json there), byte-code, nor the console scripts an
    install writes outside site-packages (`../../../bin/openbell`)."""
    paths = {line.split(",")[0] for line in text.splitlines() if line}
    return {p for p in paths if not p.startswith((dist_info, "../")) and not p.endswith(".pyc")}


def test_the_wheel_is_what_installs_and_runs_the_demo_outside_the_source_tree(
    clone: Path, installed: Path, tmp_path: Path
) -> None:
    env = clean_env(tmp_path / "home")
    dist = tmp_path / "dist"
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(dist), "."], clone, env
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert [
        line for line in (built.stdout + built.stderr).splitlines() if BUILD_WARNING.search(line)
    ] == []
    (wheel,) = dist.glob("openbell-*.whl")
    # What the install put in its virtualenv is, file for file, the wheel built here.
    with zipfile.ZipFile(wheel) as archive:
        (record,) = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
        dist_info = record.rsplit("/", 2)[0] + "/"
        in_wheel = record_of(dist_info, archive.read(record).decode())
    (site,) = installed.glob("lib/python*/site-packages")
    (installed_record,) = site.glob(f"{dist_info}RECORD")
    assert record_of(dist_info, installed_record.read_text(encoding="utf-8")) == in_wheel

    python = installed / "bin" / "python"
    listed = run([str(python), "-m", "pip", "list", "--format", "freeze"], tmp_path, env)
    names = {line.split("==")[0].lower() for line in listed.stdout.splitlines()}
    assert "openbell" in names
    assert sorted(names & set(DEV_TOOLS)) == []

    empty = tmp_path / "somewhere"
    empty.mkdir()
    demo = run([str(installed / "bin" / "openbell"), "demo"], empty, env)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert (empty / "var" / "demo.db").is_file()
    boards = [line for line in demo.stdout.splitlines() if " leaderboard (" in line]
    assert [line.split()[0] for line in boards] == ["us", "cn", "crypto"]
    # The package it ran is the installed one, not the source tree's.
    where = run(
        [str(python), "-c", "import openbell.ops.web as w; print(w.__path__[0])"], empty, env
    )
    assert where.stdout.strip().startswith(str(site)), where.stdout
    assert not any(
        re.search(r"\b\w*(Deprecation|Future|Resource|User)Warning\b", line)
        for line in demo.stderr.splitlines()
    ), demo.stderr[-3000:]


@dataclass
class Tutorial:
    """A tutorial's shell blocks as two scripts: its install, then everything after it."""

    setup: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    fake_llm_blocks: int = 0


def blocks_of(page: Path, with_fake_llm: bool) -> Tutorial:
    """Read `page`'s sh blocks and markers into the scripts that run them as written."""
    tutorial = Tutorial()
    markers: list[str] = []
    lines = iter(page.read_text(encoding="utf-8").splitlines())
    for line in lines:
        marker = MARKER.fullmatch(line.strip())
        if marker:
            words = marker.group(1).split()
            if words[0] == "stop":
                if with_fake_llm or words[1] != "fake-llm":
                    tutorial.steps.append(f'kill -INT "$pid_{words[1].replace("-", "_")}"')
                    tutorial.steps.append(f'wait "$pid_{words[1].replace("-", "_")}"')
            else:
                markers.append(marker.group(1))
            continue
        if line != "```sh":
            continue
        block: list[str] = []
        for body in lines:
            if body == "```":
                break
            block.append(body)
        text = "\n".join(block)
        if "setup" in markers:
            tutorial.setup.append(text)
            # The reader's shell keeps what the install block sourced (its virtualenv).
            tutorial.steps.extend(b for b in block if b.startswith(". "))
        elif "fake-llm" in markers and not with_fake_llm:
            tutorial.fake_llm_blocks += 1
        elif background := [m for m in markers if m.startswith("background ")]:
            _, name, address = background[0].split()
            host, port = address.rsplit(":", 1)
            pid = f"pid_{name.replace('-', '_')}"
            (command,) = block
            tutorial.steps.append(f"{command} > {name}.log 2>&1 &\n{pid}=$!")
            tutorial.steps.append(f'wait_for {host} {port} "${pid}" {name}.log')
        else:
            tutorial.steps.append(text)
        markers = []
    return tutorial


PRELUDE = """set -euo pipefail -m -x
wait_for() {  # HOST PORT PID LOG: until HOST:PORT accepts a connection, while PID lives
  for _ in $(seq 600); do
    if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
    if ! kill -0 "$3" 2>/dev/null; then cat "$4" >&2; return 1; fi
    sleep 0.2
  done
  cat "$4" >&2; return 1
}
trap 'kill -INT $(jobs -p) 2>/dev/null || true' EXIT
"""


def has_fake_llm(clone: Path, env: dict[str, str]) -> bool:
    """Whether the install has `openbell fake-llm` (issue 28 item 2)."""
    openbell = clone / ".venv-run" / "bin" / "openbell"
    return run([str(openbell), "fake-llm", "--help"], clone, env).returncode == 0


def test_every_command_of_the_tutorials_runs_as_written(
    clone: Path, installed: Path, tmp_path: Path
) -> None:
    need_jail("strategy")  # bubblewrap with a network namespace of its own, as strategy code has
    assert [page.name for page in TUTORIALS] == ["getting-started-zh.md", "getting-started.md"]
    assert (installed / "bin" / "openbell").is_file()  # the install block has run (`installed`)
    env = clean_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    left_out = 0
    for page in TUTORIALS:
        fake_llm = has_fake_llm(clone, env)
        tutorial = blocks_of(page, with_fake_llm=fake_llm)
        left_out += tutorial.fake_llm_blocks
        script = tmp_path / f"{page.stem}.sh"
        script.write_text(PRELUDE + "\n".join(tutorial.steps) + "\n", encoding="utf-8")
        ran = subprocess.run(
            [*NETWORK_OF_ITS_OWN, "bash", str(script)],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=TUTORIAL_TIMEOUT_S,
            check=False,
        )
        assert ran.returncode == 0, f"{page.name}:\n{ran.stderr[-4000:]}"
    assert (clone / "var" / "momentum.db").is_file()
    assert (clone / "var" / "momentum-cn.db").is_file()
    if left_out:
        pytest.skip(
            f"every tutorial command ran but the {left_out} blocks that need `openbell fake-llm` "
            "(issue 28 item 2, not in this install yet): they run once it is"
        )
