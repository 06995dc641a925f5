"""The CLI's dispatch: one explicit lazy table, plug-ins through entry points, startup kept light."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from graphstream.cli import COMMANDS, build_parser, main

HEAVY = ("numba", "zarr", "torch")


def _modules_after(argv: list[str]) -> set[str]:
    """The modules a fresh interpreter has imported after ``graphstream ARGV`` (which may exit)."""
    code = ("import json, sys\nfrom graphstream.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_help_imports_no_command_module():
    loaded = _modules_after(["--help"])
    commands = {m for m in loaded if m.startswith("graphstream.commands.")}
    assert commands == {"graphstream.commands.flags"}
    assert not [m for m in loaded if m.split(".")[0] in HEAVY]


def test_command_imports_only_its_module():
    loaded = _modules_after(["info", "--help"])
    commands = {m for m in loaded if m.startswith("graphstream.commands.")}
    assert commands == {"graphstream.commands.flags", "graphstream.commands.info"}
    # the command's own imports (the store: zarr) come with it; the degree kernels only when it runs
    assert not [m for m in loaded if m.split(".")[0] in ("trainer", "numba", "torch")]


def test_every_command_listed_and_plugins_found():
    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(COMMANDS) <= set(choices)
    assert "train" in choices  # the trainer's entry point (pip install -e . registers it)
    for name, parser in choices.items():  # --json is every command's, from the one shared parent
        assert "--json" in parser._option_string_actions, name


def test_train_help_without_torch():
    loaded = _modules_after(["train", "--help"])
    assert "trainer.cli" in loaded
    assert "torch" not in loaded


def test_unknown_command_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def _policy_after(argv: list[str], env_policy: str | None) -> str | None:
    """OMP_WAIT_POLICY in the environment of a fresh interpreter after ``graphstream ARGV`` (which may exit)."""
    code = ("import os\nfrom graphstream.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "print(os.environ.get('OMP_WAIT_POLICY', 'unset'))")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_policy is not None:
        env["OMP_WAIT_POLICY"] = env_policy
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return proc.stdout.strip().splitlines()[-1]


def _arenas_after(argv: list[str], env_max: str | None) -> tuple[int, str]:
    """glibc malloc arenas in a fresh interpreter after ``graphstream ARGV`` and four live threads that each
    call malloc (glibc gives each new thread an arena of its own while the limit allows), and the
    MALLOC_ARENA_MAX its children would inherit."""
    code = ("import ctypes, os, sys, tempfile, threading\nfrom graphstream.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "libc = ctypes.CDLL('libc.so.6')\nlibc.malloc.restype = ctypes.c_void_p\n"
            "libc.fopen.restype = ctypes.c_void_p\nlibc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]\n"
            "libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]\n"
            "libc.fclose.argtypes = [ctypes.c_void_p]\n"
            "held, barrier = [], threading.Barrier(4)\n"
            "def alloc():\n    held.append(libc.malloc(64))\n    barrier.wait()\n"   # all four alive at once
            "threads = [threading.Thread(target=alloc) for _ in range(4)]\n"
            "[t.start() for t in threads]; [t.join() for t in threads]\n"
            "path = tempfile.mktemp()\nf = libc.fopen(path.encode(), b'w')\nlibc.malloc_info(0, f)\nlibc.fclose(f)\n"
            "heaps = open(path).read().count('<heap nr=')\nos.unlink(path)\n"
            "print(heaps, os.environ.get('MALLOC_ARENA_MAX', 'unset'))")
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if env_max is not None:
        env["MALLOC_ARENA_MAX"] = env_max
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    heaps, inherited = proc.stdout.strip().splitlines()[-1].split()
    return int(heaps), inherited


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.path.exists("/etc/alpine-release"),
                    reason="glibc's malloc arenas")
def test_commands_run_with_one_malloc_arena_unless_a_limit_is_set():
    """Threads' arenas held freed memory apart (graphstream._resources.one_malloc_arena: R-MAT s22's partition
    743 -> 625 MiB): a command runs with one, and so do the processes it starts; the user's own limit wins,
    and plug-ins keep glibc's default."""
    assert _arenas_after(["info", "--help"], None) == (1, "1")
    heaps, inherited = _arenas_after(["info", "--help"], "2")
    assert heaps == 2 and inherited == "2"
    heaps, inherited = _arenas_after(["train", "--help"], None)
    assert heaps == 5 and inherited == "unset"   # the main arena and one for each thread


def test_commands_run_with_openmp_s_passive_wait_policy_unless_one_is_set():
    """numba's OpenMP threads spin after every parallel region, taking cores the workers need
    (graphstream._resources.quiet_openmp); the user's own policy wins, and plug-ins (the trainer's torch) keep
    OpenMP's default."""
    assert _policy_after(["info", "--help"], None) == "PASSIVE"
    assert _policy_after(["info", "--help"], "ACTIVE") == "ACTIVE"
    assert _policy_after(["train", "--help"], None) == "unset"


def test_json_stdout_holds_the_object_alone_whatever_a_library_prints(tmp_path):
    """With --json, what a C library prints on stdout while the command runs (METIS's "***Cannot bisect a
    graph with 0 vertices!", through printf) and what Python code prints there go to stderr: stdout is
    the one JSON object. Without --json stdout is left alone."""
    code = (
        "import ctypes, os, sys\n"
        "import graphstream.commands.info as info\n"
        "from graphstream.cli import main\n"
        "def run(args):\n"
        "    ctypes.CDLL(None).printf(b'***from C\\n')\n"
        "    os.write(1, b'***from fd 1\\n')\n"
        "    print('***from python')\n"
        "    return {'a': 1}\n"
        "info.run = run\n"
        "sys.exit(main(['info', 'nowhere.zarr'] + sys.argv[1:]))\n")
    proc = subprocess.run([sys.executable, "-c", code, "--json"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"a": 1}
    assert all(f"***from {w}" in proc.stderr for w in ("C", "fd 1", "python")), proc.stderr
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert plain.returncode == 0 and "***from fd 1" in plain.stdout and "***from python" in plain.stdout


def test_ctrl_c_while_the_commands_load_is_one_line(monkeypatch, capsys):
    """SIGINT in the second the commands' modules take to import printed a 50-line traceback."""
    from graphstream import cli

    def interrupted(argv=None):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["info", "g.zarr"]) == 130
    assert capsys.readouterr().err == "graphstream info: interrupted (SIGINT) while starting; nothing was written\n"
