#!/bin/bash
# Length-aggregation probe behind the default (notes/task_probe.md, "Length, second attempt"):
# one base policy, then sequence_mean vs constant at the default budget over seeds, each final
# checkpoint sampled on the test split. Run from the repo root with the venv active:
#   notes/length_probe.sh OUT BASE_CONFIG_JSON [TRAINING_JSON_FRAGMENT]
#   SEEDS="0 1 2 3 4 5" notes/length_probe.sh /tmp/lp '{}' ', "learning_rate": 2e-4'
# (BASE_CONFIG_JSON '{}' is the default base policy; the fragment is appended to the training JSON.)
set -euo pipefail
OUT=$1; BASE=$2; EXTRA=${3:-}
mkdir -p "$OUT"
[ -d "$OUT/splits" ] || grpo-ablation splits --task '{}' --out "$OUT/splits" > /dev/null
[ -f "$OUT/base/base_policy.json" ] || grpo-ablation base-policy --splits "$OUT/splits" \
    --out "$OUT/base" --task '{}' --base "$BASE" > "$OUT/base.log" 2>&1
for seed in ${SEEDS:-0 1 2}; do
  for agg in sequence_mean constant; do
    run="$OUT/runs/$agg-$seed"
    [ -f "$run/run_info.json" ] || python -m grpo_ablation.training.train --base "$OUT/base" \
        --data "$OUT/splits" --out "$run" --threads 1 \
        --training "{\"aggregation\": \"$agg\", \"seed\": $seed $EXTRA}" > "$OUT/$agg-$seed.log" 2>&1
  done
done
SEEDS="${SEEDS:-0 1 2}" python "$(dirname "$0")/length_probe.py" "$OUT"
