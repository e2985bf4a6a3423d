import pytest

from statkit import mean, median


def test_mean() -> None:
    assert mean([1, 2, 3, 4]) == 2.5


def test_median_odd_sorted() -> None:
    assert median([1, 2, 3]) == 2


def test_median_unsorted() -> None:
    assert median([3, 1, 2]) == 2


def test_median_even() -> None:
    assert median([4, 1, 3, 2]) == 2.5


def test_empty() -> None:
    with pytest.raises(ValueError):
        median([])
