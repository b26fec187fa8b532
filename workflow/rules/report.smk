# Diagnostics, tables, figures and the report (filled in by the reporting rules).


def report_targets():
    return []
