"""What a person gave that is at fault, and every problem of a config found in one pass.

``InputError`` is the base of the errors a person's input causes (a config, a study's
registration, ledger or records, a file named on the command line): a command a person runs
prints its message alone and exits 1 (``grpo_ablation.cli``), where a pipeline job keeps the
traceback in its log. ``DesignError`` is a config's; it carries every problem a check found, and
``Problems`` collects them over checks that do not depend on each other, so a config with three
mistakes is told all three at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class InputError(ValueError):
    """A person's input is at fault (named in the message, with what to do)."""


class DesignError(InputError):
    """The ablation design in the config is inconsistent: each problem named in the message with
    its key, one a line where there are several (``problems``)."""

    def __init__(self, *problems: str) -> None:
        self.problems = list(dict.fromkeys(problems))
        lines = self.problems
        super().__init__(
            lines[0]
            if len(lines) == 1
            else f"{len(lines)} problems in the config:\n  " + "\n  ".join(lines)
        )


class Problems:
    """The problems of independent checks, collected: each check runs in ``with
    problems.check():``, which keeps what it raised (a DesignError's problems, or a config
    section's own ValueError) and goes on; ``raise_any`` then raises them all as one DesignError."""

    def __init__(self) -> None:
        self.found: list[str] = []

    @contextlib.contextmanager
    def check(self) -> Iterator[None]:
        try:
            yield
        except DesignError as err:
            self.found += err.problems
        except ValueError as err:  # a section's own check (an option, a task kind) names it too
            self.found.append(str(err))

    def raise_any(self) -> None:
        if self.found:
            raise DesignError(*self.found)
