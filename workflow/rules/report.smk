# Diagnostics (per run, from the rollout log), tables, figures and the report.
#
# Figures alone, after a style change (retrains nothing; seconds once results exist):
#     snakemake --cores 2 --configfile config/<name>.yaml figures
# The figure code (analysis/plots/) is an input of the figure rules, so editing it is enough to
# rebuild them; add `--forcerun stage_figures token_weight_figure` to rebuild them without any edit.
from grpo_ablation.code import sources
from grpo_ablation.layout import (
    FIGURE_FORMATS,
    READING,
    READING_VIEW,
    RECORDS,
    TOKEN_WEIGHTS,
    figure_files,
)

STAGES_ON = DESIGN.stage_names
# Each job's code (its module and every package module it imports: grpo_ablation.code) is an
# input, so editing any of it rebuilds what the job writes, and no list is kept by hand.
FIGURE_CODE = sources("analysis.jobs.figures", root=SRC)
TABLE_CODE = sources("analysis.jobs.tables", root=SRC)
READING_CODE = sources("analysis.jobs.reading", root=SRC)


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
    DESIGN.seeds_of,
    [src for s in stages for src in DESIGN.stage(s).sources()],
)
selection_arg = lambda wildcards, input: " ".join(
    f"--selection {path}" for path in (input.selection if "selection" in input.keys() else [])
)


rule diagnostics:
    input:
        run=TREE.run_info("{cell}", "{seed}"),
        code=sources("commands.diagnostics", root=SRC),
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
        **slurm(0),
    conda:
        CONDA_ENV
    log:
        TREE.run_log("diagnostics", "{cell}", "{seed}"),
    benchmark:
        TREE.run_benchmark("diagnostics", "{cell}", "{seed}")
    shell:
        "python {params.cli} diagnostics --run {params.run} --out {params.out} > {log} 2>&1"


# The tables the report shows, each as its HTML view (the table rendered, its text above it, the
# CSV to download): output key -> (caption, category, label). Every file the tables job writes is
# declared, from layout.TABLES (``Tree.tables``); the job refuses to write another set.
REPORTED_TABLES = {
    "results_html": ("results_table", "Tables", "results per cell and stage"),
    "objectives_html": ("objectives_table", "Appendix", "objective records"),
    "hypotheses_html": ("hypotheses_table", "Tables", "declared hypotheses and their verdicts"),
    "calibration_html": ("calibration_table", "Tables", "mixed-group calibration"),
    "coupling_html": ("coupling_table", "Tables", "coupling of the cells' samples"),
    "efficiency_html": ("efficiency_table", "Tables", "compute efficiency per cell"),
}
table_output = lambda key, path: (
    path if key not in REPORTED_TABLES else report(
        path,
        caption=f"../report/{REPORTED_TABLES[key][0]}.rst",
        category=REPORTED_TABLES[key][1],
        labels={**DRAW_LABEL, "table": REPORTED_TABLES[key][2]},
    )
)


rule tables:
    # Every number of the analysis, computed once (analysis/jobs/tables.py): the figures and the
    # reading read these files.
    input:
        unpack(lambda wildcards: results_of(STAGES_ON, draw_of(wildcards))),
        code=TABLE_CODE,
        base=rules.evaluate_base.output.test,  # the base policy, every table's first row
        design=rules.design.output[0],
        push=PUSH_JSON if PUSH_JUDGED else [],  # judges the push hypotheses
    output:
        **{key: table_output(key, path) for key, path in TREE.tables().items()},
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


# Subcategories by stage title ("stage 1: ..."), which sorts in stage order. A figure's first
# format (PNG) is the report's; every file comes from layout (``Tree.stage_figures``).
stage_title = lambda wildcards: DESIGN.stage_title(wildcards.stage)
SHOWN = f"_{FIGURE_FORMATS[0]}"
figure_output = lambda key, path: (
    path if not key.endswith(SHOWN) else report(
        path,
        caption=f"../report/figure_{key.removesuffix(SHOWN)}.rst",
        category="1. Effects" if key.removesuffix(SHOWN) == "effects" else "Figures",
        subcategory=stage_title,
        labels={**DRAW_LABEL, "stage": "{stage}", "figure": key.removesuffix(SHOWN)},
    )
)


rule stage_figures:
    # Reads the tables job's files and draws: no run is loaded, nothing is fitted again.
    input:
        code=FIGURE_CODE,
        design=rules.design.output[0],
        results=rules.tables.output.results,
        tables=rules.tables.output,
    output:
        **{key: figure_output(key, path) for key, path in TREE.stage_figures("{stage}").items()},
    params:
        cli=CLI,
        tables=folder("results", of="input"),
        objective=lambda wildcards: DESIGN.stage_caption(wildcards.stage),
        out=folder(f"effects{SHOWN}"),
    conda:
        CONDA_ENV
    log:
        TREE.log("figures", "{stage}"),
    benchmark:
        TREE.benchmark("figures", "{stage}")
    shell:
        "python {params.cli} figures --design {input.design} --tables {params.tables}"
        " --stage {wildcards.stage} --out {params.out} > {log} 2>&1"


rule effects_reading:
    # The verdicts on the declared hypotheses, then one paragraph per stage from the effects
    # table; composed from the tables job's files (analysis/jobs/reading.py). The report's landing
    # page shows its opening (from the RST); its item is the HTML view, the reading rendered.
    input:
        effects=rules.tables.output.effects,
        verdicts=rules.tables.output.hypotheses,
        calibration=rules.tables.output.calibration,
        coupling=rules.tables.output.coupling,
        efficiency=rules.tables.output.efficiency,
        push=PUSH_OUTPUTS[0] if PUSH["enabled"] else [],
        code=READING_CODE,
    output:
        rst=TREE.figure(READING),
        view=report(
            TREE.figure(READING_VIEW),
            caption="../report/reading.rst",
            category="1. Effects",
            subcategory="reading of the contrasts",
            labels={**DRAW_LABEL, "figure": "reading"},
        ),
    params:
        cli=CLI,
        push=lambda wildcards, input: f"--push {input.push}" if PUSH["enabled"] else "",
        out=folder("rst"),
    localrule: True
    conda:
        CONDA_ENV
    log:
        TREE.log("figures", "reading"),
    shell:
        "python {params.cli} reading --effects {input.effects} --verdicts {input.verdicts}"
        " --calibration {input.calibration} --coupling {input.coupling} {params.push}"
        " --efficiency {input.efficiency}"
        " --out {params.out} > {log} 2>&1"


rule token_weight_figure:
    input:
        table=SHARED.calculations(TOKEN_WEIGHTS_TABLE),
        code=FIGURE_CODE,
    output:
        png=report(
            SHARED.figure(figure_files(TOKEN_WEIGHTS)[0]),
            caption="../report/figure_token_weights.rst",
            category="Conventions",
            labels={"figure": "token weights of the worked example"},
        ),
        pdf=SHARED.figure(figure_files(TOKEN_WEIGHTS)[1]),
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
        "python {params.cli} token-weights --table {input.table} --out {params.out} > {log} 2>&1"


FIGURE_TARGETS = [
    *per_draw(
        [
            *(path for s in STAGES_ON for path in TREE.stage_figures(s).values()),
            *rules.effects_reading.output,
        ]
    ),
    *rules.token_weight_figure.output,
]


# Called by all_targets (common.smk): everything the report shows.
report_targets = lambda: [
    *per_draw(rules.tables.output),
    *FIGURE_TARGETS,
    *per_draw(PUSH_OUTPUTS if PUSH["enabled"] else []),
    *(POOLED_OUTPUTS if DRAWS else []),
    *(POOLED_FIGURES if DRAWS else []),
    *([STUDY_LOOK] if STUDY_LOOK else []),
]


# Pooled over base-policy draws (base_policy.draws): the draw as the unit, verdicts first. The
# report's first category; its subcategories sort by name: the reading with the verdicts, then
# each stage's effect plot over draws ("stage 1: ..."), then the tables.
POOLED = Tree(DESIGN.pooled_dir())
POOLED_OUTPUTS = [
    *POOLED.pooled_tables().values(),
    POOLED.pooled_reading(),
    POOLED.pooled_reading_view(),
]
POOLED_CATEGORY = "0. Pooled over draws"
POOLED_FIRST = "0. reading and verdicts"
# The pooled tables the report shows, each as its HTML view: output key -> (caption, label).
REPORTED_POOLED = {
    "results_html": ("pooled_table", "results pooled over draws"),
    "hypotheses_html": ("pooled_hypotheses_table", "declared hypotheses and their verdicts"),
    "agreement_html": ("pooled_agreement_table", "sign agreement over draws"),
    "efficiency_html": ("pooled_efficiency_table", "compute efficiency pooled over draws"),
}
pooled_table_output = lambda key, path: (
    path if key not in REPORTED_POOLED else report(
        path,
        caption=f"../report/{REPORTED_POOLED[key][0]}.rst",
        category=POOLED_CATEGORY,
        subcategory="tables",
        labels={"table": REPORTED_POOLED[key][1]},
    )
)


# A study's draw, once its tables are written, is copied into the study's tracked records
# (studies/<name>/draw=<d>/, design/records.py), which its looks read: commit them as they land.
# Only the draws built here: a recorded draw's records are inputs no job makes.
RECORD = lambda draw: f"{draw_source(DESIGN, draw)}/{RECORDS}"

if STUDY_RECORDS and BUILT:

    rule record_draw:
        input:
            tables=rules.tables.output.efficiency_fits,
            design=rules.design.output[0],
            registration=str(STUDY_RECORDS / REGISTRATION),
            code=sources("commands.study_record", root=SRC),
        output:
            f"{Tree(STUDY_RECORDS).draw('{draw}')}/{RECORDS}",
        wildcard_constraints:
            draw="|".join(map(str, BUILT)),
        params:
            cli=CLI,
        localrule: True
        conda:
            CONDA_ENV
        log:
            TREE.log("record_draw"),
        shell:
            "python {params.cli} study-record --design {input.design} --draw {wildcards.draw}"
            " > {log} 2>&1"


rule pooled:
    input:
        # each draw's per-run table, base row and predictions (its tables: no run's file is read
        # again); a study's draws from its records (records.json lists and hashes their files)
        per_draw([rules.tables.output[k] for k in ("runs", "results", "effects")])
        if not STUDY_RECORDS
        else [RECORD(d) for d in DRAWS],
        per_draw([PUSH_JSON] if PUSH_JUDGED else []),
        design=rules.design.output[0],
        code=sources("analysis.jobs.pooled", root=SRC),
    output:
        **{key: pooled_table_output(key, path) for key, path in POOLED.pooled_tables().items()},
        reading=POOLED.pooled_reading(),
        view=report(
            POOLED.pooled_reading_view(),
            caption="../report/pooled_reading.rst",
            category=POOLED_CATEGORY,
            subcategory=POOLED_FIRST,
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


# The pooled figures (analysis/jobs/pooled_figures.py), drawn from the pooled tables: the verdicts
# on the declared hypotheses (where there are any) beside the pooled reading, then each stage's
# effect plot over draws. Every file comes from layout (``Tree.pooled_figures``); the first format (PNG) of each
# is the report's, in the pooled category, before every draw's own figures.
POOLED_FIGURES = POOLED.pooled_figures(STAGES_ON, bool(DESIGN.sections.get("hypotheses")))
POOLED_SHOWN = {
    **{
        path: ("verdicts", POOLED_FIRST)
        for key, path in POOLED.pooled_verdict_figures().items()
        if key.endswith(SHOWN)
    },
    **{
        path: (key.removesuffix(SHOWN), DESIGN.stage_title(s))
        for s in STAGES_ON
        for key, path in POOLED.pooled_stage_figures(s).items()
        if key.endswith(SHOWN)
    },
}
pooled_figure_output = lambda path: (
    path if path not in POOLED_SHOWN else report(
        path,
        caption=f"../report/pooled_figure_{POOLED_SHOWN[path][0]}.rst",
        category=POOLED_CATEGORY,
        subcategory=POOLED_SHOWN[path][1],
        labels={"figure": f"{POOLED_SHOWN[path][0]} pooled over draws"},
    )
)


rule pooled_figures:
    # Reads the pooled job's tables and draws: nothing is pooled or tested again.
    input:
        tables=rules.pooled.output,
        results=rules.pooled.output.results,
        reading=rules.pooled.output.reading,
        design=rules.design.output[0],
        code=sources("analysis.jobs.pooled_figures", root=SRC),
    output:
        [pooled_figure_output(path) for path in POOLED_FIGURES],
    params:
        cli=CLI,
        tables=folder("results", of="input"),
        out=folder("reading", of="input"),
    localrule: True
    conda:
        CONDA_ENV
    log:
        SHARED.log("pooled_figures"),
    shell:
        "python {params.cli} pooled-figures --design {input.design} --tables {params.tables}"
        " --out {params.out} > {log} 2>&1"


# A sequential study's look (study.looks): where this design's draws are one look's
# (study.draws[:n]), the look is judged on the pooled tables' draws, recorded in the study's ledger
# and in its own file, and the next look's override written (analysis/jobs/study_look.py).
STUDY_LOOK = SHARED.study_look(len(DRAWS)) if DRAWS and DESIGN.study_look is not None else None


if STUDY_LOOK:
    # Before any job: the study is registered and this look's config is the registered one.
    from grpo_ablation.design.registration import check_registered, registration_file

    try:
        check_registered(config)
    except ValueError as err:
        raise WorkflowError(f"study: {err}") from err

    rule study_look:
        input:
            means=rules.pooled.output.draw_means,
            records=[RECORD(d) for d in DRAWS],  # the numbers' hashes the ledger keeps
            design=rules.design.output[0],
            registration=str(registration_file(config)),
            code=sources("analysis.jobs.study_look", root=SRC),
        output:
            STUDY_LOOK,
        params:
            cli=CLI,
        localrule: True
        conda:
            CONDA_ENV
        log:
            SHARED.log("study_look"),
        shell:
            "python {params.cli} study-look --design {input.design} --draw-means {input.means}"
            " --out {output} > {log} 2>&1"


rule figures:
    # Every figure, the pooled ones the report opens with included, and nothing upstream that is
    # already built.
    input:
        FIGURE_TARGETS,
        POOLED_FIGURES if DRAWS else [],
    localrule: True
