"""The paper's round-width presets, in a module with no imports.

Kept apart from :mod:`pacore_graph.settings.config` (which needs pydantic) so the
``pacore`` command can offer ``--preset`` choices without importing it.
"""

__all__ = ["PRESETS"]

#: The paper's presets (Table 1), as *configured*: the final K=1 round is
#: appended at run time, exactly like the public pipeline's
#: ``num_responses_per_round``.
PRESETS: dict[str, tuple[int, ...]] = {
    "low": (4,),
    "medium": (16,),
    "high": (32, 4),
}
