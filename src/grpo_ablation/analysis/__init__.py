"""From run outputs to conclusions: diagnostics, intervals, tables, figures.

By role, each calling only the ones below it:

- ``jobs/``: one module per analysis job (the functions the CLI's commands call): it reads what
  its rule declares, calls the rest, and writes the files its rule declares (``layout``).
- ``prose/``: the readings, words composed around the tables' numbers.
- ``plots/``: the figures drawn from the tables (matplotlib), and how a figure is saved.
- here: the numbers. The runs read into frames (``loading``), the statistics (``stats``,
  ``sequential``), each table computed and written (``result_tables``, ``hypotheses``,
  ``efficiency``, ``calibration``, ``coupling``, ``push_tables``, ``draws``, ``study``,
  ``diagnostics``), and how a number is shown (``render``, ``marks``).

One direction: the tables job (``jobs.tables.write_all``) computes every number once and writes
``layout.TABLES``; the figures job (``jobs.figures.write_figures``) reads those tables and draws;
the reading (``jobs.reading.write_reading``) is composed from them."""

# The figures drawn for every stage: spelled in layout, which the DAG imports (neither matplotlib
# nor torch); kept here for the analysis's callers.
from grpo_ablation.layout import STAGE_FIGURES

__all__ = ["STAGE_FIGURES"]
