# The push of each objective on the same samples (push section of the config): at the base policy
# and chosen checkpoints of the baseline cell's first-seed run, the baseline being the reference
# of the stages that vary std scaling and aggregation.
PUSH = config["push"]
PUSH_CELL = DESIGN.baseline().path
PUSH_JSON = TREE.push(PUSH_CELL, SEEDS[0])
PUSH_OUTPUTS = [
    TREE.table("push.csv"),
    TREE.table("push_cosine.csv"),
    TREE.table("push.md"),
    TREE.figure("push.png"),
    TREE.figure("push.pdf"),
]


rule push:
    input:
        run=TREE.run_info("{cell}", "{seed}"),
        base=rules.base_policy.output[0],
        train=rules.splits.output.train,
    output:
        TREE.push("{cell}", "{seed}"),
    params:
        cli=CLI,
        training=training_json,
        task=TASK,
        push=json.dumps(PUSH, sort_keys=True),
        run=folder("run", of="input"),
        data=folder("train", of="input"),
    threads: THREADS
    resources:
        runtime=config["resources"]["diagnostics_runtime"],
        mem_mb=config["resources"]["diagnostics_mem_mb"],
    conda:
        CONDA_ENV
    log:
        TREE.run_log("push", "{cell}", "{seed}"),
    benchmark:
        TREE.run_benchmark("push", "{cell}", "{seed}")
    shell:
        "python {params.cli} push --base {input.base} --run {params.run} --data {params.data}"
        " --training {params.training:q} --task {params.task:q} --push {params.push:q}"
        " --threads {threads} --out {output} > {log} 2>&1"


rule push_report:
    input:
        push=PUSH_JSON,
        code=str(Path(str(workflow.current_basedir)).parents[1] / "src/grpo_ablation/analysis/push.py"),
    output:
        csv=report(
            PUSH_OUTPUTS[0],
            caption="../report/push_table.rst",
            category="Tables",
            labels={**DRAW_LABEL, "table": "push of each objective on the same samples"},
        ),
        cosine=PUSH_OUTPUTS[1],
        md=PUSH_OUTPUTS[2],
        png=report(
            PUSH_OUTPUTS[3],
            caption="../report/figure_push.rst",
            category="Figures",
            subcategory="push of each objective",
            labels={**DRAW_LABEL, "figure": "push"},
        ),
        pdf=PUSH_OUTPUTS[4],
    params:
        cli=CLI,
    localrule: True
    conda:
        CONDA_ENV
    log:
        TREE.log("push_report"),
    shell:
        "python {params.cli} push-report --push {input.push} --tables {output.csv}"
        " --figure {output.png} > {log} 2>&1"
