"""Model names the server answers to: the PaCoRe method is chosen by model name.

Drop-in proxies for test-time compute pick the method through the ``model``
field, so an application switches to PaCoRe by changing ``base_url`` and
``model`` only. ``pacore-low``, ``pacore-medium`` and ``pacore-high`` are the
paper's presets and are listed by ``GET /v1/models`` (chat front ends show
that list); ``pacore:8,2`` picks any round widths (a final K=1 round is added,
as with ``pacore run --rounds 8,2``).
"""

from __future__ import annotations

from pacore_graph.settings.config import MAX_ROUND_WIDTH, PRESETS

__all__ = ["LISTED_MODELS", "parse_model_name"]

#: What ``GET /v1/models`` lists, mapped to the configured round widths.
LISTED_MODELS: dict[str, tuple[int, ...]] = {
    f"pacore-{name}": PRESETS[name] for name in ("low", "medium", "high")
}


def parse_model_name(name: str) -> tuple[int, ...]:
    """The configured round widths a model name asks for; ValueError if it names none."""
    if name in LISTED_MODELS:
        return LISTED_MODELS[name]
    prefix, sep, spec = name.partition(":")
    if prefix != "pacore" or not sep:
        raise ValueError(
            f"unknown model {name!r}; use {', '.join(LISTED_MODELS)} or pacore:K1,K2 "
            "(e.g. pacore:8,2)"
        )
    widths: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part.isdigit() or not 1 <= int(part) <= MAX_ROUND_WIDTH:
            raise ValueError(
                f"model {name!r}: round widths must be integers in [1, {MAX_ROUND_WIDTH}] "
                "separated by commas, e.g. pacore:8,2"
            )
        widths.append(int(part))
    return tuple(widths)
