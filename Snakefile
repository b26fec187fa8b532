# The GRPO ablation: fixed splits -> base policy -> matched-budget cells over seeds -> lm-eval of
# every checkpoint -> diagnostics, tables, figures, report. Rules are thin; the logic lives in
# the grpo_ablation package. Run with `make run`, or `snakemake --cores 2 --configfile ...`.
from snakemake.utils import min_version

min_version("9.0")


# The CPU default, unless a --configfile names another config: Snakemake would otherwise merge
# that file over this one, and keys of the default (e.g. base_policy.filler_max) would leak into it.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/push.smk"
include: "workflow/rules/report.smk"


# Before the first job: how many jobs, and how long they should take here, from the job times of
# earlier runs on this machine (grpo_ablation.design.cost).
onstart:
    planned = [
        (cost.kind(job.benchmark) if job.benchmark else job.rule.name, job.threads)
        for job in workflow.dag.needrun_jobs()
    ]
    measured = cost.measured_seconds(Path(config.get("results_dir", "results")))
    print(cost.estimate(planned, measured, workflow.resource_settings.cores or 1).sentence())


rule all:
    input:
        all_targets,
    default_target: True
