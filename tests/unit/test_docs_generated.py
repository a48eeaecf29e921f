"""The generated parts of docs/ are what their generators write (issue #22 item 5): the
error table from `errors.py`, the command reference from the argparse parsers, and each
benchmark's section of performance.md, which only `tools/benchdoc.py` rewrites."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from capability_anchor import errors
from capability_anchor.web.errors import HTTP_STATUS
from tests.kit.paths import ROOT, tool

TOOLS = ROOT / "tools"
PERFORMANCE = ROOT / "docs" / "explanation" / "performance.md"
BENCHES = sorted(TOOLS.glob("bench_*.py"))


def _tool(name: str) -> ModuleType:
    # The generators import their shared module as scripts do (`import docgen`): it is
    # loaded by its path once, instead of putting tools/ on sys.path.
    sys.modules.setdefault("docgen", tool("docgen"))
    return tool(name)


def test_the_errors_reference_is_the_one_generated_from_errors_py() -> None:
    tool = _tool("errors_table")
    assert tool.DOC.read_text() == tool.table(), "run: .venv/bin/python tools/errors_table.py"


def test_the_errors_reference_has_every_class_with_its_status_and_exit_code() -> None:
    text = (ROOT / "docs" / "reference" / "errors.md").read_text()
    classes = [
        c
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, errors.CapabilityAnchorError)
    ]
    assert len(classes) > 40
    for c in classes:
        status = HTTP_STATUS[c.http_error]
        row = re.search(
            rf"`{c.__name__}` \| `{c.code}` \| `{c.http_error}` \| (\d+) \| (\d) \|", text
        )
        assert row is not None, c.__name__
        assert (int(row.group(1)), int(row.group(2))) == (status, c.exit_code), c.__name__


def test_the_cli_reference_is_the_one_generated_from_the_parsers() -> None:
    tool = _tool("cli_reference")
    assert tool.DOC.read_text() == tool.reference(), "run: .venv/bin/python tools/cli_reference.py"


def test_the_cli_reference_has_every_command() -> None:
    text = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for command in ("init", "append", "serve", "export", "audit", "monitor", "witness serve"):
        assert f"\n## `capability-anchor {command}`\n" in text, command
    assert "\n## `verify-proof`\n" in text
    assert "usage: verify-proof" in text


@pytest.mark.parametrize("bench", BENCHES, ids=lambda p: p.stem)
def test_each_benchmark_writes_its_own_section(bench: Path) -> None:
    name = bench.stem.removeprefix("bench_")
    source = bench.read_text()
    assert f'benchdoc.run("{name}", main)' in source, "its __main__ goes through benchdoc.run"
    begin, end = _tool("benchdoc").markers(name)
    text = PERFORMANCE.read_text()
    assert text.count(begin) == 1 and text.count(end) == 1, name
    assert text.index(begin) < text.index(end)


def test_the_writer_replaces_only_its_section(tmp_path: Path) -> None:
    benchdoc = _tool("benchdoc")
    copy = tmp_path / "performance.md"
    copy.write_text(PERFORMANCE.read_text())
    before = copy.read_text()
    body = benchdoc.entry(
        ".venv/bin/python tools/bench_kernel.py --rounds 1",
        "root of 10 leaves: 0.001 s\n",
        when="2026-12-02 04:00 UTC",
        commit="abc1234",
        load="1.00 1.00 1.00",
    )
    copy.write_text(benchdoc.with_section(before, "kernel", body))
    after = copy.read_text()
    begin, end = benchdoc.markers("kernel")
    head, rest = before.split(begin, 1)
    tail = rest.split(end, 1)[1]
    assert after.startswith(head + begin + "\n") and after.endswith(end + tail)
    assert after[len(head + begin + "\n") : len(after) - len(end + tail)] == body
    assert "commit abc1234" in body and "root of 10 leaves" in body
    # Every other section is byte for byte what it was.
    for other in BENCHES:
        other_name = other.stem.removeprefix("bench_")
        if other_name == "kernel":
            continue
        b, e = benchdoc.markers(other_name)
        assert after.split(b, 1)[1].split(e, 1)[0] == before.split(b, 1)[1].split(e, 1)[0]
    # A second run replaces the first, not appends to it.
    again = benchdoc.with_section(after, "kernel", body)
    assert again == after


def test_the_writer_refuses_a_page_without_the_section() -> None:
    benchdoc = _tool("benchdoc")
    with pytest.raises(SystemExit):
        benchdoc.with_section("# Performance\n", "kernel", "x\n")


def test_run_writes_the_output_of_a_successful_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    benchdoc = _tool("benchdoc")
    copy = tmp_path / "performance.md"
    copy.write_text(PERFORMANCE.read_text())
    monkeypatch.setattr(sys, "argv", ["tools/bench_kernel.py", "--rounds", "1", "--write-doc"])
    seen: list[list[str]] = []

    def main() -> int:
        seen.append(list(sys.argv))
        print("one figure: 1 ms")
        return 0

    monkeypatch.setattr(benchdoc, "ROOT", tmp_path)
    assert benchdoc.run("kernel", main, path=copy) == 0
    assert seen == [["tools/bench_kernel.py", "--rounds", "1"]]  # the flag is not main's
    begin, end = benchdoc.markers("kernel")
    section = copy.read_text().split(begin, 1)[1].split(end, 1)[0]
    assert "one figure: 1 ms" in section
    assert "`.venv/bin/python tools/bench_kernel.py --rounds 1`" in section
