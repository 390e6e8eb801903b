"""The `openbell` command caps glibc's malloc arenas before any thread starts (`ops/entry.py`):
threads that allocate then share the capped arenas instead of each keeping one of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

#: Eight threads allocate, then the process counts its malloc heaps (glibc's `malloc_info`).
_CHILD = textwrap.dedent(
    """
    import ctypes, sys, threading
    from openbell.ops.entry import limit_malloc_arenas
    limited = limit_malloc_arenas() if sys.argv[1] == "cap" else False
    done = threading.Event()
    ready = threading.Barrier(9)
    def allocate():
        kept = [[n] * 10 for n in range(20000)]
        ready.wait()
        done.wait()
    threads = [threading.Thread(target=allocate) for _ in range(8)]
    for thread in threads:
        thread.start()
    ready.wait()
    libc = ctypes.CDLL(None)
    libc.open_memstream.restype = ctypes.c_void_p
    text, size = ctypes.c_char_p(), ctypes.c_size_t()
    stream = ctypes.c_void_p(libc.open_memstream(ctypes.byref(text), ctypes.byref(size)))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    print(limited, ctypes.string_at(text, size.value).decode().count("<heap nr="))
    done.set()
    for thread in threads:
        thread.join()
    """
)


def _heaps(mode: str, **env: str) -> tuple[str, int]:
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        timeout=60,
    )
    limited, heaps = done.stdout.split()
    return limited, int(heaps)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
    reason="glibc's malloc only",
)
def test_the_arena_cap_holds_threads_to_two_heaps_unless_the_environment_sets_one() -> None:
    assert _heaps("cap") == ("True", 2)
    limited, uncapped = _heaps("none")
    assert limited == "False"
    assert uncapped > 2  # each allocating thread got an arena of its own
    assert _heaps("cap", MALLOC_ARENA_MAX="4")[0] == "False"  # the operator's setting stands
