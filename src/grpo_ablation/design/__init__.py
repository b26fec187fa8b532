"""What the config declares and what is checked before any job runs.

``options`` (the training, compute and evaluation options of a run), ``axes`` (the ablated
choices and the published recipes), ``ablation`` (stages, cells, seeds and draws, built once
from the config),
``hypotheses`` (the declared hypotheses, their contrasts and the roles of every contrast),
``power`` (what a design can detect), ``checks`` (the checks before any job, and what the DAG
needs of the config) and ``schema`` (the config schema's sections, written from the options).

The Snakefile imports this package and ``grpo_ablation.layout`` alone, so the layer imports
neither torch nor pandas nor scipy (tests/test_boundaries.py): planning a DAG stays fast and runs
where they are not installed.
"""
