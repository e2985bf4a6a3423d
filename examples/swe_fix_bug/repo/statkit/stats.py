"""Descriptive statistics."""


def mean(values: list[float]) -> float:
    """Arithmetic mean; ValueError on an empty list."""
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)


def median(values: list[float]) -> float:
    """Middle value of the data; ValueError on an empty list."""
    if not values:
        raise ValueError("median of an empty list")
    middle = len(values) // 2
    return values[middle]
