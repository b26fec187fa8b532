"""From run outputs to conclusions: diagnostics, intervals, tables, figures.

One direction: the tables job (``tabulate.write_all``) computes every number once and writes
``layout.TABLES``; the figures job (``figures.write_figures``) reads those tables and draws; the
reading (``compose.write_reading``) is composed from them."""

# The figures drawn for every stage: spelled in layout, which the DAG imports (neither matplotlib
# nor torch); kept here for the analysis's callers.
from grpo_ablation.layout import STAGE_FIGURES

__all__ = ["STAGE_FIGURES"]
