"""From run outputs to conclusions: diagnostics, intervals, tables, figures."""

# The figures drawn for every stage; the DAG names their files, so this lives where importing it
# pulls in neither matplotlib nor torch.
STAGE_FIGURES = ("accuracy", "groups", "length", "clip_truncation", "mixed")
