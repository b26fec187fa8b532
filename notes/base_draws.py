"""Do the default's conclusions depend on the base-policy draw? Run the default ablation with other
base-policy seeds and tabulate, per stage and cell, each contrast to the stage's reference: its
sign and whether its 95% interval excludes zero, draw by draw.

    python notes/base_draws.py --draws 0 1 2 --results results/base_draws      # runs what is missing
    python notes/base_draws.py --draws 0 1 2 --results results/base_draws --table-only

Draw s is config/config.yaml with base_policy.seed = s, in experiment ``default_base<s>``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from grpo_ablation.analysis.render import to_markdown

ROOT = Path(__file__).resolve().parents[1]
CONTRASTS = {
    "greedy_final_diff": "Δ greedy acc.",
    "sampled_final_diff": "Δ sampled mean@k",
    "length_incorrect_late_diff": "Δ incorrect length, last ¼ of training",
    "test_length_incorrect_diff": "Δ incorrect length, test",
}


def run_draw(seed: int, results: Path) -> Path:
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["experiment"] = f"default_base{seed}"
    config["results_dir"] = str(results)
    config["base_policy"]["seed"] = seed
    path = results / f"base{seed}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    snakemake = Path(sys.executable).with_name("snakemake")
    subprocess.run(
        [str(snakemake), "--cores", "2", "--configfile", str(path)], cwd=ROOT, check=True
    )
    return results / config["experiment"] / "tables/results.csv"


def contrast_table(tables: dict[int, pd.DataFrame]) -> pd.DataFrame:
    rows = []
    for seed, t in tables.items():
        t = t[~t["is_reference"] & t["cell"].str.startswith("std=")]
        for _, r in t.iterrows():
            for q, label in CONTRASTS.items():
                mean, low, high = r[f"{q}_mean"], r[f"{q}_low"], r[f"{q}_high"]
                rows.append(
                    {
                        "stage": r["stage"],
                        "cell": r["cell"],
                        "contrast": label,
                        "draw": seed,
                        "mean": mean,
                        "excludes_zero": bool(low > 0 or high < 0),
                    }
                )
    frame = pd.DataFrame(rows)
    out = []
    for (stage, cell, contrast), g in frame.groupby(["stage", "cell", "contrast"], sort=False):
        signs = {1 if m > 0 else -1 if m < 0 else 0 for m in g["mean"]}
        out.append(
            {
                "stage": stage,
                "cell": cell,
                "contrast": contrast,
                "means by draw": " / ".join(f"{m:+.3f}" for m in g["mean"]),
                "same sign in every draw": len(signs) == 1,
                "interval excludes zero in": f"{int(g['excludes_zero'].sum())} of {len(g)}",
            }
        )
    return pd.DataFrame(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--results", type=Path, default=ROOT / "results/base_draws")
    p.add_argument("--table-only", action="store_true", help="only tabulate finished draws")
    p.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="SEED=CSV",
        help="take draw SEED's results.csv from elsewhere (a finished default run)",
    )
    a = p.parse_args()
    given = {int(k): Path(v) for k, v in (x.split("=", 1) for x in a.table)}
    tables = {}
    for seed in a.draws:
        csv = given.get(seed) or a.results / f"default_base{seed}/tables/results.csv"
        if not csv.exists() and not a.table_only:
            csv = run_draw(seed, a.results)
        tables[seed] = pd.read_csv(csv)
    table = contrast_table(tables)
    out = a.results / "contrasts_by_draw.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(to_markdown(table))
    print(to_markdown(table))


if __name__ == "__main__":
    main()
