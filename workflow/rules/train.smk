# One training job per (cell, seed). Only run_info.json (written last) is declared, so the
# checkpoints of a job that dies stay on disk and the rerun resumes from the newest one.


rule run_options:
    # One run's options as a file for its train and push jobs. The params are the rerun trigger:
    # the options less each at its declared neutral value (common.smk), so an option added with
    # the value that trains as before it existed rewrites no file and retrains no finished run.
    output:
        TREE.run_options("{cell}", "{seed}"),
    params:
        options=training_json,
        # every option, for the job (derived from the output path: not compared by Snakemake)
        training=training_arguments,
    log:
        TREE.run_log("run_options", "{cell}", "{seed}"),
    run:
        write_text(output[0], params.training, log[0])


rule train:
    # resources.runs_per_gpu > 1: the group `training`, N jobs to an sbatch sharing its GPU
    # (--group-components training=N; grpo_ablation.design.packing); else no group.
    group:
        packing.pack_group(config["resources"])
    input:
        base=rules.base_policy.output[0],
        train=rules.splits.output.train,
        manifest=rules.splits.output.manifest,
        options=TREE.run_options("{cell}", "{seed}"),
        task=section("task"),
        compute=section("compute"),
    output:
        TREE.run_info("{cell}", "{seed}"),
    params:
        cli=CLI,
        # The rerun trigger: the options less each at its declared neutral value (common.smk), so
        # an option added with the value that trains as before it existed retrains no finished run.
        options=training_json,
        task=TASK,
        compute=COMPUTE,
        out=folder(0),
        data=folder("train", of="input"),
    threads: THREADS
    resources:
        runtime=config["resources"]["train_runtime"],
        mem_mb=config["resources"]["train_mem_mb"],
        # `gpu` is the resource the SLURM executor turns into --gpus (packed: `gres` gpu:1 for
        # the group, and one of the card's gpu_slots).
        **TRAIN_GPU_RESOURCES,
        # One machine: the launcher starts every process of a cell on the node it runs on.
        nodes=1,
        # A resource, not a param: params are rerun triggers, and tracking changes no result.
        report_to=",".join(config["tracking"]["report_to"]) or "none",
        # where its checkpoints go (a resource too: moving them retrains nothing)
        checkpoints=checkpoints_of,
        **slurm(TRAIN_GPUS),
    conda:
        CONDA_ENV
    log:
        TREE.run_log("train", "{cell}", "{seed}"),
    benchmark:
        TREE.run_benchmark("train", "{cell}", "{seed}")
    shell:
        "python {params.cli} train --base {input.base} --data {params.data} --out {params.out}"
        " --training {input.options} --task {input.task}"
        " --compute {input.compute}"
        " --threads {threads} --report-to {resources.report_to}"
        " --checkpoints {resources.checkpoints:q} > {log} 2>&1"
