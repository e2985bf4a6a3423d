"""cli/graph: ``pacore graph``'s own part: the grader by name, and a missing file as a usage error.

Drawing and loading themselves are message_graph's (tests/message_graph/);
here the command runs in-process through ``main`` on a results file written
as ``pacore run`` writes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacore_graph.cli import EXIT_USAGE, main
from pacore_graph.values.records import PaCoReResult, Trajectory


def results_file(tmp_path: Path) -> Path:
    rounds = (
        tuple(
            Trajectory(round=0, index=i, content=f"\\boxed{{{a}}}", message=f"\\boxed{{{a}}}")
            for i, a in enumerate(("4", "5"))
        ),
        (
            Trajectory(
                round=1, index=0, content="\\boxed{4}", message="\\boxed{4}", references=(1, 0)
            ),
        ),
    )
    result = PaCoReResult(answer="\\boxed{4}", reasoning=None, rounds=rounds, schedule=(2, 1))
    line = {"request_id": "p1", "id": "p1", **result.to_dict(), "problem_id": "p1"}
    line["ground_truth"] = "4"
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(line) + "\n")
    return path


def test_the_named_grader_colours_the_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results, png, js = results_file(tmp_path), tmp_path / "g.png", tmp_path / "g.json"
    argv = ["graph", str(results), "--id", "p1", "--out", str(png), "--json", str(js)]

    def correct(grader: str) -> list[bool]:
        assert main([*argv, "--grader", grader]) == 0
        assert capsys.readouterr().out.strip() == f"wrote {png}"
        nodes = {n["id"]: n for n in json.loads(js.read_text())["nodes"]}
        assert sorted(nodes) == ["r0.0", "r0.1", "r1.0"]
        return [nodes[k]["correct"] for k in sorted(nodes)]

    assert correct("exact") == [True, False, True]
    assert correct("choice") == [False, False, False]  # "4" is no choice letter: never right


def test_an_unknown_grader_is_one_line_and_nothing_is_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "g.png"
    argv = ["graph", str(results_file(tmp_path)), "--id", "p1", "--out", str(png)]
    assert main([*argv, "--grader", "no_such_grader"]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacore: error: --grader: ") and "\n" not in err
    assert not png.exists()


def test_a_missing_results_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.jsonl"
    argv = ["graph", str(missing), "--id", "p1", "--out", str(tmp_path / "g.png")]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacore: error: ") and "none.jsonl" in err


def _eval_results(tmp_path: Path) -> Path:
    """An eval results file where problem p1 was run by two methods."""
    result = PaCoReResult(
        answer="\\boxed{4}",
        reasoning=None,
        rounds=((Trajectory(round=0, index=0, content="\\boxed{4}", message="\\boxed{4}"),),),
        schedule=(1,),
    )
    lines = [
        {
            "method": m,
            "family": m.split(":")[0],
            "problem_id": "p1",
            "sample": 0,
            "ground_truth": "4",
            "error": None,
            "result": result.to_dict(),
        }
        for m in ("pacore:low", "majority:4")
    ]
    path = tmp_path / "eval-results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--id", "nope"], "no run of problem 'nope'"),
        (["--id", "p1", "--method", "rsa:4,2,2"], "has no run of method 'rsa:4,2,2'"),
        (["--id", "p1"], "was run by several methods"),
    ],
    ids=["unknown-id", "unknown-method", "ambiguous"],
)
def test_a_run_not_in_the_file_is_bad_input_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    """The README's table: unusable input is exit 2 and ``pacore: error:``, not a failed run."""
    png = tmp_path / "g.png"
    assert main(["graph", str(_eval_results(tmp_path)), *extra, "--out", str(png)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacore: error: ") and "\n" not in err
    assert says in err
    assert not png.exists()


def test_the_ambiguous_run_hint_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _eval_results(tmp_path)
    argv = ["graph", str(results), "--id", "p1", "--out", str(tmp_path / "g.png")]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "pacore:low, majority:4" in err and "--method METHOD" in err
    # ... and the flag it names works.
    assert main([*argv, "--method", "majority:4"]) == 0
    assert (tmp_path / "g.png").exists()
