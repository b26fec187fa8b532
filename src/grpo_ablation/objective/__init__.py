"""The objective's pure functions, its record and the worked numbers."""
