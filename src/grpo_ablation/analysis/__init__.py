"""From run outputs to conclusions: diagnostics, intervals, tables, figures."""

# The figures drawn for every stage; the DAG names their files, so this lives where importing it
# pulls in neither matplotlib nor torch.
# The effect plot comes first: the report opens with it.
STAGE_FIGURES = (
    "effects",
    "accuracy",
    "groups",
    "length",
    "clip_truncation",
    "mixed",
    "coupling",
    "efficiency",
)
