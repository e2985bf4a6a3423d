"""CodeTests: the typed tests a code record carries, round-tripped through plain JSON."""

from __future__ import annotations

import json

import pytest

from pacore_graph.eval.code_tests import (
    CODE_TESTS_KEY,
    DEFAULT_TIME_LIMIT_S,
    MAX_TESTS,
    CodeTest,
    CodeTests,
    code_tests_of,
)


def _functional() -> CodeTests:
    return CodeTests(
        tests=(
            CodeTest("[1, 2]\n3", "[0, 1]", "functional"),
            CodeTest("[3, 3]\n6", "[0, 1]", "functional", public=False),
        ),
        fn_name="twoSum",
        starter_code="class Solution:\n    def twoSum(self, nums, target):\n        ",
    )


def test_round_trips_through_json_text() -> None:
    tests = _functional()
    again = code_tests_of({CODE_TESTS_KEY: json.loads(json.dumps(tests.to_json()))})
    assert again == tests
    assert again is not None and again.public_count == 1
    assert again.inputs == ["[1, 2]\n3", "[3, 3]\n6"] and again.outputs == ["[0, 1]"] * 2
    assert again.time_limit_s == DEFAULT_TIME_LIMIT_S


def test_records_without_tests_have_none() -> None:
    assert code_tests_of({"answer": "42"}) is None
    assert code_tests_of("42") is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tests": []}, "at least one test"),
        (
            {"tests": [{"input": "1", "output": "1", "testtype": "batch"}]},
            "test 0: unknown test type",
        ),
        ({"tests": [{"input": "1", "testtype": "stdin"}]}, "test 0 has no 'output'"),
        ({"tests": [{"input": "[1]", "output": "1", "testtype": "functional"}]}, "func_name"),
        (
            {"tests": [{"input": "1", "output": "1", "testtype": "stdin"}], "time_limit_s": 0},
            "time_limit_s",
        ),
        ({"tests": "1"}, "'tests' list"),
        ({"tests": ["1"]}, "test 0 is a str, not a test object"),
    ],
)
def test_bad_tests_are_refused_with_the_reason(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        code_tests_of({CODE_TESTS_KEY: data})


def test_one_test_object_is_named_by_where_it_stands_and_public_can_be_imposed() -> None:
    item = {"input": "1", "output": "2", "testtype": "stdin", "public": False}
    assert CodeTest.from_json(item, "t") == CodeTest("1", "2", "stdin", public=False)
    assert CodeTest.from_json(item, "t", public=True).public  # a whole column's, not the item's
    assert CodeTest.from_json({**item, "public": 1}, "t").public is True
    del item["public"]
    assert CodeTest.from_json(item, "t").public  # public unless it says otherwise
    with pytest.raises(ValueError, match=r"^private_test_cases\[2\] is a list, not a test object$"):
        CodeTest.from_json([], "private_test_cases[2]")
    with pytest.raises(ValueError, match=r"^cases\[0\]: a code test's input and output must be"):
        CodeTest.from_json({**item, "output": 2}, "cases[0]")


def test_more_tests_than_the_cap_are_refused_before_they_are_built() -> None:
    """Issue 31 (low): 4M tests per problem loaded with no cap (1.7 GB)."""
    assert MAX_TESTS == 10_000
    one = {"input": "1", "output": "1", "testtype": "stdin"}
    with pytest.raises(ValueError, match="10001 tests: more than 10000 per problem"):
        CodeTests.from_json({"tests": [one] * (MAX_TESTS + 1)})
    test = CodeTest("1", "1", "stdin")
    with pytest.raises(ValueError, match="more than 10000 per problem"):
        CodeTests(tests=(test,) * (MAX_TESTS + 1))
    assert len(CodeTests.from_json({"tests": [one] * MAX_TESTS}).tests) == MAX_TESTS
