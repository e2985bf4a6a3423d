"""What the baseline graphs' tests share: the question and how a synthesis call is told apart.

Replies are a function of the request (the prompt, ``sample_index``, ``seed``),
never of call order, so which explorer finishes first cannot change a result.
"""

from __future__ import annotations

from pacore_graph.testing.fake_client import FakeCall

QUESTION = "What is 6 times 7?"
SYNTHESIS_START = "You are given a problem and a list of reference responses."
BASE_SEED = 100


def is_synthesis(call: FakeCall) -> bool:
    return call.last_user.startswith(SYNTHESIS_START)
