"""Training runs: the TRL trainer subclass, the run entry point, launch, retention, cost."""
