from grpo_ablation.code import sources
from grpo_ablation.layout import PUSH_FIGURE, PUSH_PILOT_TABLE, PUSH_TABLES, figure_files
from grpo_ablation.design.hypotheses import declared as declared_hypotheses, hypothesis_choices

# The push of each objective on the same samples (push section of the config): at the base policy
# and chosen checkpoints of the baseline cell's first-seed run, the baseline being the reference
# of the stages that vary std scaling and aggregation.
PUSH = config["push"]
PUSH_CELL = DESIGN.baseline().path
PUSH_JSON = TREE.push(PUSH_CELL, SEEDS[0])
# A declared hypothesis judged on the push makes the push an input of the verdicts.
PUSH_JUDGED = any(h.on_push for h in declared_hypotheses(DESIGN))
# What the push job is told: the config's section and the choices its hypotheses compare.
PUSH_PARAM = json.dumps({**PUSH, "hypothesis_choices": hypothesis_choices(DESIGN)}, sort_keys=True)
CONFIG_SECTIONS["push"] = PUSH_PARAM
PUSH_OUTPUTS = [
    *(TREE.table(name) for name in PUSH_TABLES),
    *(TREE.figure(name) for name in figure_files(PUSH_FIGURE)),
]


# A run is needed only when a checkpoint is measured (push.steps other than [0]).
PUSH_NEEDS_RUN = PUSH["steps"] != [0]


rule push:
    input:
        run=TREE.run_info("{cell}", "{seed}") if PUSH_NEEDS_RUN else [],
        base=rules.base_policy.output[0],
        train=rules.splits.output.train,
        options=TREE.run_options("{cell}", "{seed}"),
        task=section("task"),
        push=section("push"),
    output:
        TREE.push("{cell}", "{seed}"),
    params:
        cli=CLI,
        training=training_json,
        task=TASK,
        push=PUSH_PARAM,
        run=lambda wildcards, input: f"--run {Path(input.run).parent}" if input.run else "",
        data=folder("train", of="input"),
    threads: THREADS
    resources:
        runtime=config["resources"]["diagnostics_runtime"],
        mem_mb=config["resources"]["diagnostics_mem_mb"],
        **slurm(0),
    conda:
        CONDA_ENV
    log:
        TREE.run_log("push", "{cell}", "{seed}"),
    benchmark:
        TREE.run_benchmark("push", "{cell}", "{seed}")
    shell:
        "python {params.cli} push --base {input.base} {params.run} --data {params.data}"
        " --training {input.options} --task {input.task}"
        " --push {input.push}"
        " --threads {threads} --out {output} > {log} 2>&1"


# The pilot (asked for by path, never by the default target): at the base policy, on the training
# prompts and keys the test never uses; its table's *_diff_sd columns are the per-replicate SDs a
# push hypothesis is planned from (power.sd).
rule push_pilot:
    input:
        base=rules.base_policy.output[0],
        train=rules.splits.output.train,
        options=TREE.run_options("{cell}", "{seed}"),
        task=section("task"),
        push=section("push"),
    output:
        TREE.push("{cell}", "{seed}", "pilot"),
    params:
        cli=CLI,
        training=training_json,
        task=TASK,
        push=PUSH_PARAM,
        data=folder("train", of="input"),
    threads: THREADS
    resources:
        runtime=config["resources"]["diagnostics_runtime"],
        mem_mb=config["resources"]["diagnostics_mem_mb"],
        **slurm(0),
    conda:
        CONDA_ENV
    log:
        TREE.run_log("push_pilot", "{cell}", "{seed}"),
    shell:
        "python {params.cli} push --purpose pilot --base {input.base} --data {params.data}"
        " --training {input.options} --task {input.task}"
        " --push {input.push}"
        " --threads {threads} --out {output} > {log} 2>&1"


rule push_report:
    input:
        push=PUSH_JSON,
        code=sources("analysis.jobs.push_report", root=SRC),
    output:
        csv=PUSH_OUTPUTS[0],
        cosine=PUSH_OUTPUTS[1],
        md=PUSH_OUTPUTS[2],
        # the report shows the table as its HTML view (text, table, the CSV to download)
        html=report(
            PUSH_OUTPUTS[3],
            caption="../report/push_table.rst",
            category="Tables",
            labels={**DRAW_LABEL, "table": "push of each objective on the same samples"},
        ),
        png=report(
            PUSH_OUTPUTS[4],
            caption="../report/figure_push.rst",
            category="Figures",
            subcategory="push of each objective",
            labels={**DRAW_LABEL, "figure": "push"},
        ),
        pdf=PUSH_OUTPUTS[5],
    params:
        cli=CLI,
        out=folder("csv", up=2),
    localrule: True
    conda:
        CONDA_ENV
    log:
        TREE.log("push_report"),
    shell:
        "python {params.cli} push-report --push {input.push} --out {params.out} > {log} 2>&1"


rule push_pilot_report:
    input:
        push=TREE.push(PUSH_CELL, SEEDS[0], "pilot"),
        code=sources("analysis.jobs.push_report", root=SRC),
    output:
        table=TREE.table(PUSH_PILOT_TABLE),
    params:
        cli=CLI,
        out=folder("table", up=2),
    localrule: True
    conda:
        CONDA_ENV
    log:
        TREE.log("push_pilot_report"),
    shell:
        "python {params.cli} push-report --push {input.push} --pilot --out {params.out}"
        " > {log} 2>&1"
