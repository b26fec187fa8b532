"""The readings: words composed around the numbers of the tables, one module per table read."""
