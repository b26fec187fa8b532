# Independent evaluation with lm-eval: every saved checkpoint of every run on the test split, the
# base policy as step 0, the final checkpoint on the validation split (used for selection
# between stages only), and the run's efficiency curve (its curve policies, headline metric only).
# A run is evaluated under a seed keyed by its run seed, a draw's base policy by its draw
# (evaluation.seeding.evaluation_seed). One job per run evaluates all its checkpoints (imports paid once); on a
# workstation the job hands its work to the local job worker, which pays the imports once
# per machine (src/grpo_ablation/worker.py; GRPO_WORKER=off to evaluate in the job).


rule eval_tasks:
    input:
        test=rules.splits.output.test,
        validation=rules.splits.output.validation,
        evaluation=section("evaluation"),
        task=section("task"),
    output:
        test=SHARED.task_manifest("test"),
        validation=SHARED.task_manifest("validation"),
    params:
        cli=CLI,
        evaluation=EVALUATION,
        task=TASK,
        data=folder("test", of="input"),
        tasks=folder("test", up=2),
    conda:
        CONDA_ENV
    log:
        SHARED.log("eval_tasks"),
    benchmark:
        SHARED.benchmark("eval_tasks")
    # --tasks: eval-tasks' --out by its former name (a rule's shell command is a rerun trigger: a
    # new spelling here would rerun every finished evaluation)
    shell:
        "python {params.cli} eval-tasks --data {params.data} --tasks {params.tasks}"
        " --evaluation {input.evaluation} --task {input.task} > {log} 2>&1"


rule evaluate_base:
    # group: the SLURM profile may pack several evaluation jobs into one allocation
    # (group-components), where they share one job worker.
    group:
        "evaluation"
    input:
        base=rules.base_policy.output[0],
        tasks=rules.eval_tasks.output.test,
        validation_tasks=rules.eval_tasks.output.validation,
        evaluation=section("evaluation"),
    output:
        test=TREE.base_summary("test"),
        validation=TREE.base_summary("validation"),
    params:
        cli=CLI,
        evaluation=EVALUATION,
        tasks=folder("tasks", up=2, of="input"),
        out=folder("test", up=2),
        # a draw's base policy is evaluated under a seed of its own (evaluation.seeding.evaluation_seed)
        draw=lambda wc: "" if draw_of(wc) is None else f"--draw {draw_of(wc)}",
    threads: THREADS
    resources:
        runtime=config["resources"]["eval_runtime"],
        mem_mb=config["resources"]["eval_mem_mb"],
        **EVAL_GPU_RESOURCES,
        # With --resources eval_slots=1 the jobs of a packed allocation run one after another
        # (on its one GPU), sharing its job worker.
        eval_slots=1,
        **slurm(config["resources"]["gpus_per_eval_job"]),
    conda:
        CONDA_ENV
    log:
        TREE.log("evaluate", "base"),
    benchmark:
        TREE.benchmark("evaluate", "base")
    shell:
        "python {params.cli} evaluate --base {input.base} --tasks {params.tasks} --out {params.out}"
        " --evaluation {input.evaluation} --threads {threads} {params.draw} > {log} 2>&1"


rule evaluate:
    group:
        "evaluation"
    input:
        run=TREE.run_info("{cell}", "{seed}"),
        tasks=rules.eval_tasks.output.test,
        validation_tasks=rules.eval_tasks.output.validation,
        evaluation=section("evaluation"),
    output:
        test=TREE.summary("{cell}", "{seed}", "test"),
        validation=TREE.summary("{cell}", "{seed}", "validation"),
        # exact P(correct) of the prompts each saved policy was sampled on (mixed calibration)
        calibration=TREE.calibration("{cell}", "{seed}"),
        # the efficiency curve: the policy at training.curve_points steps, scored on test
        curve=TREE.curve("{cell}", "{seed}"),
    params:
        cli=CLI,
        evaluation=EVALUATION,
        run=folder("run", of="input"),
        tasks=folder("tasks", up=2, of="input"),
        out=folder("test", up=2),
    threads: THREADS
    resources:
        runtime=config["resources"]["eval_runtime"],
        mem_mb=config["resources"]["eval_mem_mb"],
        **EVAL_GPU_RESOURCES,
        # With --resources eval_slots=1 the jobs of a packed allocation run one after another
        # (on its one GPU), sharing its job worker.
        eval_slots=1,
        **slurm(config["resources"]["gpus_per_eval_job"]),
    conda:
        CONDA_ENV
    log:
        TREE.run_log("evaluate", "{cell}", "{seed}"),
    benchmark:
        TREE.run_benchmark("evaluate", "{cell}", "{seed}")
    shell:
        "python {params.cli} evaluate --run {params.run} --tasks {params.tasks} --out {params.out}"
        " --evaluation {input.evaluation} --threads {threads} > {log} 2>&1"


checkpoint select:
    # A stage's winner on the validation split, for the stages that take it (`winner_of`).
    input:
        summaries=lambda wc: [
            Tree(exp_of(draw_of(wc))).summary(c.path, s, "validation")
            for c in cells_of(wc.stage, draw_of(wc))
            for s in SEEDS
        ],
        design=rules.design.output[0],
    output:
        TREE.selection("{stage}"),
    params:
        cli=CLI,
    conda:
        CONDA_ENV
    log:
        TREE.log("select", "{stage}"),
    benchmark:
        TREE.benchmark("select", "{stage}")
    shell:
        "python {params.cli} select --stage {wildcards.stage} --design {input.design}"
        " --out {output} {input.summaries} > {log} 2>&1"
