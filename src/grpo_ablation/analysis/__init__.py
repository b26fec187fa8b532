"""From run outputs to conclusions: diagnostics, intervals, tables, figures."""
