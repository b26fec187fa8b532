"""Lm-eval evaluation under the training protocol, and the evaluation job."""
