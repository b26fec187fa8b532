#!/usr/bin/env bash
# The smoke DAG under one set of CPU-kernel variables, into /tmp/cpu_variants/NAME:
#   notes/cpu_probe/run_variant.sh NAME [VAR=VALUE ...]
# e.g.  notes/cpu_probe/run_variant.sh native GRPO_CPU_NUMERICS=native
#       notes/cpu_probe/run_variant.sh avx512 GRPO_CPU_NUMERICS=native ATEN_CPU_CAPABILITY=avx512
#       notes/cpu_probe/run_variant.sh pinned_intel LD_PRELOAD=/tmp/probe/libfakeintel.so
# (libfakeintel.so: gcc -shared -fPIC -o /tmp/probe/libfakeintel.so notes/cpu_probe/fakeintel.c)
# then: python notes/cpu_numerics.py /tmp/cpu_variants/A/smoke /tmp/cpu_variants/B/smoke
set -euo pipefail
name=$1; shift
root=/tmp/cpu_variants/$name
rm -rf "$root"; mkdir -p "$root"
{ cat config/smoke.yaml; echo "results_dir: $root"; } > "$root/config.yaml"
env GRPO_WORKER=off "$@" snakemake --cores 2 --configfile "$root/config.yaml" -q > "$root/log.txt" 2>&1
echo "$name done: $root"
