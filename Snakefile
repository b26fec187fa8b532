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


# Before the first job: under SLURM, a run missing the partition or account its jobs need, or the
# group size its packed train jobs need, is refused (grpo_ablation.design.slurm, .packing); then how many jobs, how long they should take here (the
# job times of earlier runs on this machine) and the disk their checkpoints need
# (grpo_ablation.design.cost).
onstart:
    jobs = list(workflow.dag.needrun_jobs())
    packed = packing.runs_per_gpu(config["resources"])
    if workflow.executor_plugin.name == "slurm":
        gpu_jobs = sum(
            1 for job in jobs if not job.is_local and packing.asks_for_gpu(job.resources)
        )
        no_account = workflow.executor_settings.no_account
        problems = slurm_problems(config.get("slurm"), gpu_jobs, no_account)
        components = workflow.group_settings.group_components
        unpacked = packing.packing_problems(config["resources"], components)
        if problems or unpacked:
            raise WorkflowError(refusal(problems, unpacked))
    elif packed > 1 and packing.SLOTS not in workflow.global_resources:
        print(
            f"resources.runs_per_gpu {packed}: nothing limits how many jobs share the GPU here; "
            f"`--resources {packing.SLOTS}={packed}` runs {packed} train jobs on it at a time "
            "and an evaluation alone"
        )
    planned = [
        (cost.kind(job.benchmark) if job.benchmark else job.rule.name, job.threads) for job in jobs
    ]
    measured = cost.measured_seconds(Path(config["results_dir"]))
    print(cost.estimate(planned, measured, workflow.resource_settings.cores or 1).sentence())
    runs = [job.wildcards for job in jobs if job.rule.name == "train"]
    folder = os.path.expandvars(config.get("checkpoints_dir") or config["results_dir"])
    print(
        cost.checkpoint_disk(
            [run_training(w.cell, w.seed, draw_of(w)).checkpoints for w in runs],
            base_parameters() if runs else None,
            config["compute"]["keep_optimizer_state"],
            folder,
            free_bytes(folder),
        )
    )


rule all:
    input:
        all_targets,
    default_target: True
