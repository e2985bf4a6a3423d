"""Run control: quorum, consensus, token budgets, concurrency limits, GC tuning.

Layer: above ``values`` and ``tools``, below ``settings``: decisions over
values, no settings or I/O (``tests/test_layers.py`` holds the order). No
imports here, so that ``pacore --help`` stays fast.
"""
