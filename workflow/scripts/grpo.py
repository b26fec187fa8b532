"""The rules' entry point: runs ``grpo_ablation.cli`` from this checkout's ``src/``, so a job needs
only the pinned dependencies in its environment (venv or conda), not an installed package."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from grpo_ablation.cli import main

if __name__ == "__main__":
    main()
