"""Every command the docs show runs as written, or says what it needs that CI lacks.

The convention (docs/development.md#commands-in-the-docs says it for writers):

- Every fence of README.md and ``docs/*.md`` names its language (a bare
  fence could hide an unchecked command). Fences in ``bash``, ``sh``,
  ``shell`` or ``console`` are command blocks.
- A command block with no marker **runs**: its text, as a bash script with
  ``set -e -o pipefail``, in a fresh folder per page (a page's blocks run in
  order in the same folder, so a later block reads what an earlier one
  wrote; ``examples/``, ``benchmarks/``, ``scripts/`` and ``tests/`` are
  linked in), in the shell the README's set-up leaves (this venv's ``bin``
  first on ``PATH``), with ``PACORE_*`` and ``OTEL_*`` variables cleared. In a
  ``console`` block, ``$ `` lines are the commands and the other lines what
  they print (compared like an output, below).
- What may differ from the page: the folder, the environment, and ports.
  Every port a page names (``localhost:N``, ``127.0.0.1:N``, ``--port N``)
  becomes a free port of its own, the same one wherever the page names it,
  so blocks never collide with each other or with a server already running.
- The line right above a fence may be a marker, an HTML comment:

  ``<!-- needs: gpu, network -->``
      not run; it needs what these machines lack: ``gpu`` (a large model on
      vLLM), ``vllm`` (a vLLM install), ``docker``, ``kubernetes``,
      ``network`` (the package index, a hub dataset, a hosted API) or
      ``minutes`` (CPU minutes past this test's budget: training, the
      benchmarks, the embedded model on a dataset).
  ``<!-- run: oracle -->`` / ``<!-- run: scripted -->``
      runs, with the model the block expects at ``http://localhost:N/v1``
      served by ``pacore_graph.testing.scripted_server`` (``--responder
      oracle``, or its default responder). Also runs a ``python`` block
      (others are not run), which must then print nothing on stderr.
  ``<!-- run: server -->``
      the block is one command that serves until stopped: it is started,
      must answer on its port, and must exit cleanly on Ctrl-C.
  ``<!-- output -->``
      above a table or a ``text`` fence: what the nearest run block above
      printed. A table is compared cell by cell with the table of the run's
      output that has its columns (the page may leave columns out, such as
      wall times, never change a cell); a ``text`` fence line by line, in
      order, with times (``12.3 s``, ``450 ms``) free to differ.

- Every ``pacore`` command of every block, run or not, and every inline
  ``pacore ...`` of the pages' text, may use only flags its command has.

The runnable pages run concurrently (two at a time) in one module fixture;
each page's result is its own test.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pacore_graph.cli.parser import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
NEEDS = {
    "gpu": "a GPU: PaCoRe-8B or another large model on vLLM",
    "vllm": "a vLLM install (docs/vllm-cpu.md: 3.4 GB, minutes)",
    "docker": "Docker",
    "kubernetes": "a Kubernetes cluster",
    "network": "the network: the package index, a hub dataset, a hosted API",
    "minutes": "CPU minutes past this test's budget",
}
RUN_KINDS = {"oracle", "scripted", "server"}
BLOCK_TIMEOUT = 240.0
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<key>[a-z]+)\s*(?::\s*(?P<value>.*?))?\s*-->\s*$")
_PORT = re.compile(r"(?P<pre>(?:localhost|127\.0\.0\.1|0\.0\.0\.0):|--port[ =])(?P<port>\d{2,5})\b")
_URL_PORT = re.compile(r"(?:localhost|127\.0\.0\.1):(\d{2,5})/v1\b")
_TIME = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|min)\b")


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: tuple[str, str] | None  # (key, value) of the comment above, if any

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"

    @property
    def key(self) -> str | None:
        return self.marker[0] if self.marker else None

    @property
    def runs(self) -> bool:
        if self.lang in SHELL_LANGS:
            return self.key in (None, "run")
        return self.lang == "python" and self.key == "run"


@dataclass
class Table:
    """A markdown table of a page shown as a run's output (``<!-- output -->``)."""

    line: int
    header: list[str]
    rows: list[list[str]]


@dataclass
class Page:
    path: Path
    blocks: list[Block] = field(default_factory=list)
    outputs: dict[int, list[Block | Table]] = field(default_factory=dict)  # by block index


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _marker(lines: list[str], i: int) -> tuple[str, str] | None:
    found = _MARKER.match(lines[i - 1]) if i > 0 else None
    return (found["key"], (found["value"] or "").strip()) if found else None


def parse_page(path: Path) -> Page:
    """The page's fenced blocks and the outputs it shows after them."""
    page = Page(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening:
            fence, info = opening["fence"], opening["info"].strip()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                j += 1
            body = [line.removeprefix(opening["indent"]) for line in lines[i + 1 : j]]
            block = Block(path, i + 1, info.split()[0] if info else "", "\n".join(body) + "\n",
                          _marker(lines, i))  # fmt: skip
            if block.key == "output":
                page.outputs.setdefault(_last_run(page), []).append(block)
            else:
                page.blocks.append(block)
            i = j + 1
            continue
        marker = _marker(lines, i)
        if marker and marker[0] == "output" and lines[i].lstrip().startswith("|"):
            j = i
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            rows = [
                _cells(line) for line in lines[i:j] if not re.match(r"^\s*\|[-:| ]+\|\s*$", line)
            ]
            page.outputs.setdefault(_last_run(page), []).append(Table(i + 1, rows[0], rows[1:]))
            i = j
            continue
        i += 1
    return page


def _last_run(page: Page) -> int:
    runs = [k for k, b in enumerate(page.blocks) if b.runs]
    if not runs:
        raise AssertionError(f"{page.path.name}: an <!-- output --> with no run block above it")
    return runs[-1]


PARSED = {p: parse_page(p) for p in PAGES}
ALL_BLOCKS = [b for p in PARSED.values() for b in p.blocks]


# ----------------------------------------------------------------- the convention


def test_every_fence_names_its_language() -> None:
    bare = [b.where for b in ALL_BLOCKS if not b.lang]
    assert bare == [], f"say what these fences hold (bash, text, python, ...): {bare}"


def test_every_command_block_runs_or_says_what_it_needs() -> None:
    wrong = []
    for b in ALL_BLOCKS:
        if b.marker is None:
            continue
        key, value = b.marker
        if key == "needs":
            unknown = {r.strip() for r in value.split(",")} - set(NEEDS)
            if unknown or not value:
                wrong.append(f"{b.where}: needs {sorted(unknown)}; known: {', '.join(NEEDS)}")
        elif key == "run":
            if value not in RUN_KINDS:
                wrong.append(f"{b.where}: run: {value!r}; known: {', '.join(sorted(RUN_KINDS))}")
            elif b.lang not in SHELL_LANGS | {"python"}:
                wrong.append(f"{b.where}: run: on a {b.lang} fence")
        else:
            wrong.append(f"{b.where}: unknown marker {key!r} (needs:, run:, output)")
    assert wrong == []
    shown = [o for p in PARSED.values() for outs in p.outputs.values() for o in outs]
    assert all(isinstance(o, Table) or o.lang == "text" for o in shown)


def _simple_commands(text: str) -> Iterator[list[str]]:
    """The shell's simple commands of ``text``: words between ``&&``, ``|``, ``;``, ..."""
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        if line.startswith("$ "):
            line = line[2:]
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        lex.commenters = "#"
        try:
            tokens = list(lex)
        except ValueError:  # an unclosed quote in prose-like text: nothing to check
            continue
        words: list[str] = []
        for token in [*tokens, ";"]:
            if token and set(token) <= set("&|;()<>"):
                if words:
                    yield words
                words = []
            else:
                words.append(token)


def _pacore_argv(words: list[str]) -> list[str] | None:
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words = words[1:]
    if words and (words[0] == "pacore" or words[0].endswith("/pacore")):
        return words[1:]
    if words[:3] in (["python", "-m", "pacore_graph.cli"], ["python3", "-m", "pacore_graph.cli"]):
        return words[3:]
    return None


def _flags_of(argv: list[str]) -> tuple[str, set[str]] | None:
    """The (sub)command ``argv`` names and the flags it takes; None if it names none."""
    if not argv or argv[0] not in COMMANDS:
        return None
    parser, name, rest = build_parser(argv[0]), "", argv
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or not rest or rest[0] not in subs[0].choices:
            break
        parser, name, rest = subs[0].choices[rest[0]], f"{name} {rest[0]}".strip(), rest[1:]
    return name, {s for a in parser._actions for s in a.option_strings}


def _inline_commands() -> Iterator[tuple[str, str]]:
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for found in re.finditer(r"`(pacore [^`]+)`", text):
            yield f"{page.relative_to(ROOT)} (inline)", found.group(1).replace("\n", " ")


def test_every_pacore_flag_in_the_docs_exists() -> None:
    """Run or not, a ``pacore`` command of the docs uses only flags its command takes."""
    sources = [(b.where, b.text) for b in ALL_BLOCKS if b.lang in SHELL_LANGS]
    sources += list(_inline_commands())
    unknown = []
    checked = 0
    for where, text in sources:
        for words in _simple_commands(text):
            argv = _pacore_argv(words)
            found = _flags_of(argv) if argv is not None else None
            if argv is None or found is None:
                continue
            checked += 1
            name, flags = found
            for word in argv:
                flag = word.split("=", 1)[0]
                if flag.startswith("--") and flag != "--" and flag not in flags:
                    unknown.append(f"{where}: pacore {name} has no {flag}")
    assert checked > 50
    assert unknown == []


def test_ci_runs_the_readmes_test_command() -> None:
    """The README's second set-up command is what ``.ci/run`` installs and runs."""
    readme = PARSED[ROOT / "README.md"]
    setup = [b for b in readme.blocks if "python -m pytest" in b.text]
    assert len(setup) == 1
    parts = [p.strip() for p in setup[0].text.strip().split("&&")]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert parts[-1] in ci, f".ci/run does not run the README's test command {parts[-1]!r}"
    extras = re.findall(r'-e "\.\[([a-z,]+)\]"', setup[0].text)
    assert extras and all(f'-e ".[{e}]"' in ci for e in extras)
    torch = re.findall(r'"torch==[\d.]+"', setup[0].text)
    assert torch and all(t in ci for t in torch)


def test_the_reader_finds_markers_and_shown_outputs(tmp_path: Path) -> None:
    """The parser itself, on a page made here: what runs, what is skipped, what is compared."""
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- needs: gpu -->\n```bash\nvllm serve x\n```\n\n"
        "```bash\npacore data easy-arithmetic --n 2 --out e.jsonl\n```\n\n"
        "<!-- output -->\n| method | accuracy |\n|---|---:|\n| single | 50% |\n\n"
        "<!-- run: oracle -->\n```python\nprint(1)\n```\n\n"
        "```python\nnot run\n```\n\n```\nbare\n```\n",
        encoding="utf-8",
    )
    parsed = parse_page(page)
    assert [(b.lang, b.marker, b.runs) for b in parsed.blocks] == [
        ("bash", ("needs", "gpu"), False),
        ("bash", None, True),
        ("python", ("run", "oracle"), True),
        ("python", None, False),
        ("", None, False),
    ]
    (table,) = parsed.outputs[1]  # shown after the second block, the last one that runs
    assert isinstance(table, Table)
    assert (table.header, table.rows) == (["method", "accuracy"], [["single", "50%"]])


def test_outputs_are_compared_with_times_free_and_columns_optional() -> None:
    printed = "| method | accuracy | wall |\n|---|---:|---:|\n| single | 50% | 3.2 s |\n"
    assert compare_table(Table(1, ["method", "accuracy"], [["single", "50%"]]), printed) is None
    wrong = compare_table(Table(1, ["method", "accuracy"], [["single", "60%"]]), printed)
    assert wrong is not None and "| single | 50% |" in wrong
    missing = compare_table(Table(1, ["method", "ttc"], [["single", "9"]]), printed)
    assert missing is not None and "no table" in missing
    assert compare_lines("done in 1.0 s\nb", "a\ndone in 17.25 s\nb\n", 1) is None
    assert compare_lines("b\na", "a\nb\n", 1) is not None  # in order
    assert compare_lines("done in 1.0 tokens", "done in 2.0 tokens", 1) is not None


# ----------------------------------------------------------------- running them


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Runs ``bash -c ARGV[1]`` with Ctrl-C's default action, as in a user's terminal: a test run
#: started in the background (``cmd &``, ``nohup``) inherits SIGINT ignored, and a server
#: block would then outlive its Ctrl-C (bash itself cannot un-ignore it, Python can).
_WITH_CTRL_C = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execvp('bash', ['bash', '-c', sys.argv[1]])"
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PACORE_", "OTEL_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _normalise(text: str) -> str:
    return " ".join(_TIME.sub("<time>", text).split())


def _tables(text: str) -> list[list[list[str]]]:
    found: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            if not re.match(r"^\s*\|[-:| ]+\|\s*$", line):
                current.append(_cells(line))
        elif current:
            found.append(current)
            current = []
    return found


def compare_table(shown: Table, printed: str) -> str | None:
    """None when ``shown`` is a column subset of a table in ``printed``, else what differs."""
    for table in _tables(printed):
        header, rows = table[0], table[1:]
        if not set(shown.header) <= set(header):
            continue
        cols = [header.index(h) for h in shown.header]
        got = [[row[c] for c in cols] for row in rows]
        if got != shown.rows:
            lines = ["| " + " | ".join(r) + " |" for r in got]
            return f"the table at line {shown.line} differs; the run printed:\n" + "\n".join(lines)
        return None
    return f"the run printed no table with the columns {shown.header} (line {shown.line})"


def compare_lines(shown: str, printed: str, line: int) -> str | None:
    want = [_normalise(w) for w in shown.splitlines() if w.strip()]
    got = iter(_normalise(g) for g in printed.splitlines())
    for w in want:
        if not any(g == w for g in got):
            return f"line {line}: {w!r} is not in what the run printed (in order)"
    return None


@dataclass
class Ran:
    block: Block
    ok: bool
    seconds: float
    why: str = ""


class PageRun:
    """One page's blocks in one folder, with its port map and the servers its markers ask for."""

    def __init__(self, page: Page, folder: Path) -> None:
        self.page = page
        self.folder = folder
        self.ports: dict[str, int] = {}
        self.servers: dict[tuple[str, int], subprocess.Popen[str]] = {}
        folder.mkdir(parents=True)
        for name in ("examples", "benchmarks", "scripts", "tests"):
            (folder / name).symlink_to(ROOT / name)

    def port_text(self, text: str) -> str:
        def swap(found: re.Match[str]) -> str:
            port = self.ports.setdefault(found["port"], _free_port())
            return f"{found['pre']}{port}"

        return _PORT.sub(swap, text)

    def serve(self, kind: str, text: str) -> None:
        """Start the scripted model for each ``localhost:N/v1`` the block names (once a page)."""
        for documented in dict.fromkeys(_URL_PORT.findall(text)):
            port = self.ports.setdefault(documented, _free_port())
            if (kind, port) in self.servers:
                continue
            argv = [
                sys.executable,
                "-m",
                "pacore_graph.testing.scripted_server",
                "--port",
                str(port),
            ]
            if kind == "oracle":
                argv += ["--responder", "oracle"]
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=_env())
            assert proc.stdout is not None
            ready = proc.stdout.readline()
            assert ready.startswith("READY "), f"the scripted server did not start: {ready!r}"
            self.servers[(kind, port)] = proc

    def close(self) -> None:
        for proc in self.servers.values():
            proc.terminate()
            proc.wait(timeout=30)

    def run(self, index: int, block: Block) -> Ran:
        start = time.monotonic()
        text = self.port_text(block.text)
        kind = block.marker[1] if block.marker else None
        if kind in ("oracle", "scripted"):
            self.serve(kind, block.text)
        if block.lang == "python":
            why = self._python(index, text)
        elif kind == "server":
            why = self._server(text)
        else:
            why = self._shell(index, block, text)
        return Ran(block, why is None, time.monotonic() - start, why or "")

    def _shell(self, index: int, block: Block, text: str) -> str | None:
        shown = None
        if block.lang == "console":
            commands = [ln[2:] for ln in text.splitlines() if ln.startswith("$ ")]
            shown = "\n".join(ln for ln in text.splitlines() if not ln.startswith("$ "))
            text = "\n".join(commands) + "\n"
        script = self.folder / f"block-{index}.sh"
        script.write_text(text, encoding="utf-8")
        proc = subprocess.Popen(
            ["bash", "-e", "-o", "pipefail", script.name],
            cwd=self.folder,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its background jobs are ours to stop
        )
        try:
            out, err = proc.communicate(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return f"did not finish in {BLOCK_TIMEOUT:.0f} s\n{err[-2000:]}"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # a server the block left running
        if proc.returncode != 0:
            return (
                f"exit status {proc.returncode}\n--- stderr\n{err[-3000:]}"
                f"\n--- stdout\n{out[-1500:]}"
            )
        printed = out + err
        problems = [compare_lines(shown, printed, block.line)] if shown else []
        for output in self.page.outputs.get(index, []):
            if isinstance(output, Table):
                problems.append(compare_table(output, printed))
            else:
                problems.append(compare_lines(output.text, printed, output.line))
        found = [p for p in problems if p]
        return "\n".join(found) if found else None

    def _python(self, index: int, text: str) -> str | None:
        script = self.folder / f"block-{index}.py"
        script.write_text(text, encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, script.name],
            cwd=self.folder,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0 or proc.stderr:
            return f"exit status {proc.returncode}, stderr (must be empty):\n{proc.stderr[-3000:]}"
        return None

    def _server(self, text: str) -> str | None:
        ports = [int(p) for p in re.findall(r"--port[ =](\d+)", text)]
        if len(ports) != 1:
            return "a run: server block names its one port with --port N"
        proc = subprocess.Popen(
            [sys.executable, "-c", _WITH_CTRL_C, "exec " + text.strip()],
            cwd=self.folder,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    return (
                        f"exited ({proc.returncode}) before serving:\n{proc.stdout.read()[-2000:]}"  # type: ignore[union-attr]
                    )
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", ports[0])) == 0:
                        break
                time.sleep(0.3)
            else:
                return "nothing answered on its port within 120 s"
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
            try:
                status = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # this page's failure, with what it printed
                os.killpg(proc.pid, signal.SIGKILL)
                printed = proc.communicate(timeout=10)[0] or ""
                return f"still running 30 s after Ctrl-C; it printed:\n{printed[-2000:]}"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        if status not in (0, 130, -signal.SIGINT):
            return f"exit status {status} on Ctrl-C"
        return None


def run_page(page: Page, folder: Path) -> list[Ran]:
    runner = PageRun(page, folder)
    results = []
    try:
        for index, block in enumerate(page.blocks):
            if block.runs:
                results.append(runner.run(index, block))
                if not results[-1].ok:
                    break  # the page's later blocks may need what this one made
    finally:
        runner.close()
    return results


RUNNABLE = [p for p in PARSED.values() if any(b.runs for b in p.blocks)]


@pytest.fixture(scope="module")
def page_runs() -> Iterator[dict[Path, list[Ran]]]:
    with (
        tempfile.TemporaryDirectory(prefix="pacore-docs-") as tmp,
        concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool,
    ):
        futures = {
            page.path: pool.submit(run_page, page, Path(tmp) / page.path.stem)
            for page in sorted(RUNNABLE, key=lambda p: -sum(b.runs for b in p.blocks))
        }
        yield {path: f.result() for path, f in futures.items()}


@pytest.mark.parametrize("page", [p.path for p in RUNNABLE], ids=lambda p: p.name)
def test_the_pages_commands_run_as_written(page: Path, page_runs: dict[Path, list[Ran]]) -> None:
    ran = page_runs[page]
    expected = sum(b.runs for b in PARSED[page].blocks)
    failed = [f"{r.block.where} ({r.seconds:.0f} s): {r.why}" for r in ran if not r.ok]
    assert failed == [], "\n\n".join(failed)
    assert len(ran) == expected
