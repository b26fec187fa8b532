# The push of each objective on the same samples (push section of the config): at the base policy
# and chosen checkpoints of the baseline cell's first-seed run, the baseline being the reference
# of the stages that vary std scaling and aggregation.
PUSH = config["push"]
PUSH_CELL = pipeline.baseline(config).path
PUSH_JSON = f"{EXP}/push/{PUSH_CELL}/seed={SEEDS[0]}/push.json"
PUSH_OUTPUTS = [
    f"{EXP}/tables/push.csv",
    f"{EXP}/tables/push_cosine.csv",
    f"{EXP}/tables/push.md",
    f"{EXP}/figures/push.png",
    f"{EXP}/figures/push.pdf",
]


rule push:
    input:
        run=f"{EXP}/runs/{{cell}}/seed={{seed}}/run_info.json",
        base=rules.base_policy.output[0],
        train=rules.splits.output.train,
    output:
        f"{EXP}/push/{{cell}}/seed={{seed}}/push.json",
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
        f"{EXP}/logs/push/{{cell}}/seed={{seed}}.log",
    benchmark:
        f"{EXP}/benchmarks/push/{{cell}}/seed={{seed}}.tsv"
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
        f"{EXP}/logs/push_report.log",
    shell:
        "python {params.cli} push-report --push {input.push} --tables {output.csv}"
        " --figure {output.png} > {log} 2>&1"
