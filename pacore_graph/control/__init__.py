"""Run control: quorum, consensus, token budgets, concurrency limits, GC tuning.

Layer: may import ``errors``/``lazy`` and ``settings`` only. No imports
here, so that ``pacore --help`` stays fast.
"""
