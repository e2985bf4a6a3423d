"""Settings: the run config, option table, ``PACORE_*`` variables, presets, per-run settings.

Layer: the lowest above ``errors``/``lazy``; may import only those. No
imports here, so that ``pacore --help`` stays fast.
"""
