"""Plug-ins for the tools users already work in: each behind its own extra, none loaded by a run.

- :mod:`~pacore_graph.integrations.method_runner`: a method by name over an
  OpenAI-compatible server, with a JSON record of the run (what the plug-ins
  share);
- :mod:`~pacore_graph.integrations.inspect_provider`: Inspect AI's model
  provider ``pacore`` (``pip install 'pacore-graph[inspect]'``; ``inspect
  eval TASK --model pacore/pacore-high ...``).

The Anthropic Messages API is part of ``pacore serve``
(:mod:`pacore_graph.serve.messages_api`) and the ``verifiers`` environment of
the RL layer (:mod:`pacore_graph.rl.verifiers_env`).
"""
