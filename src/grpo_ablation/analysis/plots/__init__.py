"""The figures, drawn from the tables (matplotlib), and how a figure is saved and checked."""
