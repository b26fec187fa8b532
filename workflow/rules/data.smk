# Hub content fetched once (local rule), fixed splits (written once, hashed) and the base policy
# every cell starts from.
from grpo_ablation.code import sources


rule prefetch:
    input:
        config=section("prefetch"),
    output:
        PREFETCH,
    params:
        cli=CLI,
        config=verbatim(CONFIG_SECTIONS["prefetch"]),
    conda:
        CONDA_ENV
    log:
        SHARED.log("prefetch"),
    shell:
        "python {params.cli} prefetch --config {input.config} --out {output} > {log} 2>&1"


rule splits:
    input:
        lambda wildcards: [PREFETCH] if NEEDS_PREFETCH else [],
        task=section("task"),
    output:
        **{split: SHARED.split(split) for split in SPLITS},
        manifest=SHARED.data(MANIFEST),
    params:
        cli=CLI,
        task=TASK,
        out=folder("manifest"),
        fetched=lambda wildcards, input: f"--prefetch {input[0]}" if NEEDS_PREFETCH else "",
    conda:
        CONDA_ENV
    log:
        SHARED.log("splits"),
    benchmark:
        SHARED.benchmark("splits")
    shell:
        "python {params.cli} splits --task {input.task} --out {params.out} {params.fetched}"
        " > {log} 2>&1"


rule base_policy:
    input:
        train=rules.splits.output.train,
        validation=rules.splits.output.validation,
        base=section("base_policy"),
        task=section("task"),
        compute=section("compute"),
    output:
        TREE.base_policy(),
    params:
        cli=CLI,
        # a draw's warm start takes the draw as its seed
        base=lambda wildcards: json.dumps(
            checks.draw_base_policy(config, draw_of(wildcards)), sort_keys=True
        ),
        draw=lambda wildcards: "" if draw_of(wildcards) is None else f"--draw {draw_of(wildcards)}",
        task=TASK,
        compute=COMPUTE,
        data=folder("train", of="input"),
        out=folder(0),
    # The local warm start's weights depend on its thread count: base_policy.num_threads.
    threads: config["base_policy"].get("num_threads", THREADS)
    # A hub model that is not warm-started is only looked up (in the prefetched cache): no
    # allocation for that.
    localrule: checks.base_policy_lookup_only(config)
    resources:
        runtime=config["resources"]["base_policy_runtime"],
        mem_mb=config["resources"]["base_policy_mem_mb"],
        **packing.gpu_job_resources(config["resources"], checks.base_policy_gpus(config)),
        **slurm(checks.base_policy_gpus(config)),
    conda:
        CONDA_ENV
    log:
        TREE.log("base_policy"),
    benchmark:
        TREE.benchmark("base_policy")
    shell:
        "python {params.cli} base-policy --base {input.base} {params.draw} --task {input.task}"
        " --compute {input.compute}"
        " --splits {params.data} --out {params.out} --threads {threads} > {log} 2>&1"


rule calculations:
    input:
        code=sources("objective.calculations", root=SRC),
    output:
        SHARED.calculations(CALCULATIONS_SHEET),
        SHARED.calculations(CALCULATIONS_TABLE),
        SHARED.calculations(TOKEN_WEIGHTS_TABLE),
        # the report shows the sheet as its HTML view (each section's table rendered)
        report(
            SHARED.calculations(CALCULATIONS_VIEW),
            caption="../report/calculations.rst",
            category="Conventions",
        ),
    params:
        cli=CLI,
        out=folder(0),
    conda:
        CONDA_ENV
    log:
        SHARED.log("calculations"),
    benchmark:
        SHARED.benchmark("calculations")
    shell:
        "python {params.cli} calculations --out {params.out} > {log} 2>&1"


rule design_config:
    # The design's config sections as a file for the design job: the params are the rerun trigger
    # (written again only when the sections change); inline they made the longest command line.
    output:
        SHARED.design_config(),
    params:
        config=verbatim(json.dumps(DESIGN.sections)),
    log:
        SHARED.log("design_config"),
    run:
        write_text(output[0], params.config, log[0])


rule config_section:
    # One config section as a file for the jobs that read it (CONFIG_SECTIONS, common.smk): the
    # params are the rerun trigger (written again only when the section changes).
    output:
        SHARED.config_section("{name}"),
    params:
        text=lambda wildcards: CONFIG_SECTIONS[wildcards.name],
    log:
        SHARED.log("config_section_{name}"),
    run:
        write_text(output[0], params.text, log[0])


rule design:
    # The design the jobs read (select, tables, figures, pooled) and its analysis plan: rewritten
    # when its sections or the code that derives cells, titles, captions and roles change.
    input:
        code=sources("commands.design", root=SRC),
        config=rules.design_config.output[0],
    output:
        SHARED.design(),
    params:
        cli=CLI,
    conda:
        CONDA_ENV
    log:
        SHARED.log("design"),
    shell:
        "python {params.cli} design --config {input.config} --out {output} > {log} 2>&1"
