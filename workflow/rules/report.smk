# Diagnostics (per run, from the rollout log), tables, figures and the report.
#
# Figures alone, after a style change (retrains nothing; seconds once results exist):
#     snakemake --cores 2 --configfile config/<name>.yaml figures
# figures.py is an input of the figure rules, so editing it is enough to rebuild them; add
# `--forcerun stage_figures token_weight_figure` to rebuild them without any edit.
from grpo_ablation.analysis import STAGE_FIGURES

STAGES_ON = DESIGN.stage_names
# The plotting and table code are inputs, so editing them rebuilds what they draw.
FIGURE_CODE = str(SRC / "analysis" / "figures.py")
TABLE_CODE = [
    str(SRC / "analysis" / n)
    for n in ("loading.py", "tables.py", "render.py", "reading.py", "stats.py", "hypotheses.py", "calibration.py", "coupling.py", "efficiency.py")
]


wildcard_constraints:
    stage="|".join(STAGES_ON) or "no_stage",


# The report's landing page shows the reading of the effects (generated, never hand-written); the
# report's menu sorts categories by name, so "1. Effects" comes first.
report: "../report/workflow.rst"


# Helpers are lambdas: `snakemake --lint` wants no function definitions next to rules, and the
# logic they call lives in grpo_ablation.design (testable without Snakemake).
results_of = lambda stages, draw: checks.report_inputs(
    exp_of(draw),
    {s: [c.path for c in cells_of(s, draw)] for s in stages},
    SEEDS,
    [src for s in stages for src in DESIGN.stage(s).sources()],
)
selection_arg = lambda wildcards, input: " ".join(
    f"--selection {path}" for path in (input.selection if "selection" in input.keys() else [])
)


rule diagnostics:
    input:
        run=TREE.run_info("{cell}", "{seed}"),
    output:
        steps=TREE.steps("{cell}", "{seed}"),
        summary=TREE.diagnostics_summary("{cell}", "{seed}"),
    params:
        cli=CLI,
        run=folder("run", of="input"),
        out=folder("steps"),
    resources:
        runtime=config["resources"]["diagnostics_runtime"],
        mem_mb=config["resources"]["diagnostics_mem_mb"],
    conda:
        CONDA_ENV
    log:
        TREE.run_log("diagnostics", "{cell}", "{seed}"),
    benchmark:
        TREE.run_benchmark("diagnostics", "{cell}", "{seed}")
    shell:
        "python {params.cli} diagnostics --run {params.run} --out {params.out} > {log} 2>&1"


rule tables:
    input:
        unpack(lambda wildcards: results_of(STAGES_ON, draw_of(wildcards))),
        code=TABLE_CODE,
        base=rules.evaluate_base.output.test,  # the base policy, every table's first row
        design=rules.design.output[0],
    output:
        results=report(
            TREE.table("results.csv"),
            caption="../report/results_table.rst",
            category="Tables",
            labels={**DRAW_LABEL, "table": "results per cell and stage"},
        ),
        results_md=TREE.table("results.md"),
        results_tex=TREE.table("results.tex"),
        objectives=report(
            TREE.table("objectives.csv"),
            caption="../report/objectives_table.rst",
            category="Appendix",
            labels={**DRAW_LABEL, "table": "objective records"},
        ),
        objectives_md=TREE.table("objectives.md"),
        objectives_tex=TREE.table("objectives.tex"),
        hypotheses=report(
            TREE.table("hypotheses.csv"),
            caption="../report/hypotheses_table.rst",
            category="Tables",
            labels={**DRAW_LABEL, "table": "declared hypotheses and their verdicts"},
        ),
        hypotheses_md=TREE.table("hypotheses.md"),
        calibration=report(
            TREE.table("calibration.csv"),
            caption="../report/calibration_table.rst",
            category="Tables",
            labels={**DRAW_LABEL, "table": "mixed-group calibration"},
        ),
        calibration_md=TREE.table("calibration.md"),
        coupling=report(
            TREE.table("coupling.csv"),
            caption="../report/coupling_table.rst",
            category="Tables",
            labels={**DRAW_LABEL, "table": "coupling of the cells' samples"},
        ),
        coupling_md=TREE.table("coupling.md"),
        efficiency=report(
            TREE.table("efficiency.csv"),
            caption="../report/efficiency_table.rst",
            category="Tables",
            labels={**DRAW_LABEL, "table": "compute efficiency per cell"},
        ),
        efficiency_md=TREE.table("efficiency.md"),
        coupling_steps=TREE.table("coupling_steps.csv"),
    params:
        cli=CLI,
        exp=lambda wildcards: exp_of(draw_of(wildcards)),
        selection=selection_arg,
        out=folder("results"),
    conda:
        CONDA_ENV
    log:
        TREE.log("tables"),
    benchmark:
        TREE.benchmark("tables")
    shell:
        "python {params.cli} tables --exp {params.exp} --design {input.design} {params.selection}"
        " --out {params.out} > {log} 2>&1"


# Subcategories by stage title ("stage 1: ..."), which sorts in stage order.
stage_title = lambda wildcards: DESIGN.stage_title(wildcards.stage)
figure_png = lambda kind: report(
    TREE.figure(f"{kind}.png", "{stage}"),
    caption=f"../report/figure_{kind}.rst",
    category="1. Effects" if kind == "effects" else "Figures",
    subcategory=stage_title,
    labels={**DRAW_LABEL, "stage": "{stage}", "figure": kind},
)


rule stage_figures:
    input:
        unpack(lambda wildcards: results_of([wildcards.stage], draw_of(wildcards))),
        code=[FIGURE_CODE, *TABLE_CODE],
        base=rules.evaluate_base.output.test,  # the base policy, every table's first row
        design=rules.design.output[0],
        # The contrasts come from the results table, computed once by the tables job.
        results=rules.tables.output.results,
    output:
        **{kind: figure_png(kind) for kind in STAGE_FIGURES},
        **{f"{kind}_pdf": TREE.figure(f"{kind}.pdf", "{stage}") for kind in STAGE_FIGURES},
        effects_csv=TREE.figure("effects.csv", "{stage}"),
    params:
        cli=CLI,
        exp=lambda wildcards: exp_of(draw_of(wildcards)),
        selection=selection_arg,
        objective=lambda wildcards: DESIGN.stage_caption(wildcards.stage),
        out=folder("accuracy"),
    conda:
        CONDA_ENV
    log:
        TREE.log("figures", "{stage}"),
    benchmark:
        TREE.benchmark("figures", "{stage}")
    shell:
        "python {params.cli} figures --exp {params.exp} --design {input.design} {params.selection}"
        " --results {input.results} --stage {wildcards.stage} --out {params.out} > {log} 2>&1"


rule effects_reading:
    # The verdicts on the declared hypotheses, then one paragraph per stage from the effect plots'
    # numbers; the report's landing page shows it.
    input:
        effects=[TREE.figure("effects.csv", s) for s in STAGES_ON],
        verdicts=rules.tables.output.hypotheses,
        calibration=rules.tables.output.calibration,
        coupling=rules.tables.output.coupling,
        efficiency=rules.tables.output.efficiency,
        push=PUSH_OUTPUTS[0] if PUSH["enabled"] else [],
        code=TABLE_CODE,
    output:
        report(
            TREE.figure("reading.rst"),
            caption="../report/reading.rst",
            category="1. Effects",
            subcategory="reading of the contrasts",
            labels={**DRAW_LABEL, "figure": "reading"},
        ),
    params:
        cli=CLI,
        push=lambda wildcards, input: f"--push {input.push}" if PUSH["enabled"] else "",
    localrule: True
    conda:
        CONDA_ENV
    log:
        TREE.log("figures", "reading"),
    shell:
        "python {params.cli} reading --effects {input.effects} --verdicts {input.verdicts}"
        " --calibration {input.calibration} --coupling {input.coupling} {params.push}"
        " --efficiency {input.efficiency}"
        " --out {output} > {log} 2>&1"


rule token_weight_figure:
    input:
        code=FIGURE_CODE,
    output:
        png=report(
            SHARED.figure("token_weights.png"),
            caption="../report/figure_token_weights.rst",
            category="Conventions",
            labels={"figure": "token weights of the worked example"},
        ),
        pdf=SHARED.figure("token_weights.pdf"),
        csv=SHARED.figure("token_weights.csv"),
    params:
        cli=CLI,
        out=folder("png"),
    conda:
        CONDA_ENV
    log:
        SHARED.log("figures", "token_weights"),
    benchmark:
        SHARED.benchmark("figures", "token_weights")
    shell:
        "python {params.cli} token-weights --out {params.out} > {log} 2>&1"


FIGURE_TARGETS = [
    *per_draw(
        [
            *(TREE.figure(f"{k}.{e}", s) for s in STAGES_ON for k in STAGE_FIGURES for e in ("png", "pdf")),
            *(TREE.figure("effects.csv", s) for s in STAGES_ON),
            *rules.effects_reading.output,
        ]
    ),
    *rules.token_weight_figure.output,
]


rule figures:
    # Every figure, and nothing upstream that is already built.
    input:
        FIGURE_TARGETS,
    localrule: True


# Called by all_targets (common.smk): everything the report shows.
report_targets = lambda: [
    *per_draw(rules.tables.output),
    *FIGURE_TARGETS,
    *per_draw(PUSH_OUTPUTS if PUSH["enabled"] else []),
    *(POOLED_OUTPUTS if DRAWS else []),
]


# Pooled over base-policy draws (base_policy.draws): the draw as the unit, verdicts first.
POOLED = Tree(DESIGN.pooled_dir())
POOLED_OUTPUTS = [*POOLED.pooled_tables(), POOLED.pooled_reading()]


rule pooled:
    input:
        per_draw([rules.tables.output.results]),
        design=rules.design.output[0],
        code=[*TABLE_CODE, str(SRC / "analysis" / "draws.py")],
    output:
        results=report(
            POOLED_OUTPUTS[0],
            caption="../report/pooled_table.rst",
            category="0. Pooled over draws",
            labels={"table": "results pooled over draws"},
        ),
        rest=POOLED_OUTPUTS[1:-1],
        reading=report(
            POOLED_OUTPUTS[-1],
            caption="../report/pooled_reading.rst",
            category="0. Pooled over draws",
            labels={"figure": "reading over draws"},
        ),
    params:
        cli=CLI,
        out=folder("reading"),
    localrule: True
    conda:
        CONDA_ENV
    log:
        SHARED.log("pooled"),
    shell:
        "python {params.cli} pooled --design {input.design} --out {params.out} > {log} 2>&1"
