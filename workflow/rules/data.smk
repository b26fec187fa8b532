# Hub content fetched once (local rule), fixed splits (written once, hashed) and the base policy
# every cell starts from.


rule prefetch:
    output:
        PREFETCH,
    params:
        cli=CLI,
        config=json.dumps(
            {k: config.get(k) for k in ("task", "base_policy", "evaluation", "stand_in")}, sort_keys=True
        ),
    conda:
        "../../envs/grpo.yaml"
    log:
        f"{EXP}/logs/prefetch.log",
    shell:
        "python {params.cli} prefetch --config {params.config:q} --out {output} > {log} 2>&1"


rule splits:
    input:
        lambda wildcards: [PREFETCH] if NEEDS_PREFETCH else [],
    output:
        train=f"{EXP}/data/train.jsonl",
        validation=f"{EXP}/data/validation.jsonl",
        test=f"{EXP}/data/test.jsonl",
        manifest=f"{EXP}/data/manifest.json",
    params:
        cli=CLI,
        task=TASK,
        out=folder("manifest"),
        fetched=lambda wildcards, input: f"--prefetch {input[0]}" if input else "",
    conda:
        "../../envs/grpo.yaml"
    log:
        f"{EXP}/logs/splits.log",
    benchmark:
        f"{EXP}/benchmarks/splits.tsv"
    shell:
        "python {params.cli} splits --task {params.task:q} --out {params.out} {params.fetched}"
        " > {log} 2>&1"


rule base_policy:
    input:
        train=rules.splits.output.train,
        validation=rules.splits.output.validation,
    output:
        f"{EXP}/base/base_policy.json",
    params:
        cli=CLI,
        base=json.dumps(config["base_policy"], sort_keys=True),
        task=TASK,
        compute=COMPUTE,
        data=folder("train", of="input"),
        out=folder(0),
    # The local warm start's weights depend on its thread count: base_policy.num_threads.
    threads: config["base_policy"].get("num_threads", THREADS)
    resources:
        runtime=config["resources"]["base_policy_runtime"],
        mem_mb=config["resources"]["base_policy_mem_mb"],
    conda:
        "../../envs/grpo.yaml"
    log:
        f"{EXP}/logs/base_policy.log",
    benchmark:
        f"{EXP}/benchmarks/base_policy.tsv"
    shell:
        "python {params.cli} base-policy --base {params.base:q} --task {params.task:q} --compute {params.compute:q}"
        " --splits {params.data} --out {params.out} --threads {threads} > {log} 2>&1"


rule calculations:
    output:
        report(
            f"{EXP}/calculations/calculations.md",
            caption="../report/calculations.rst",
            category="Conventions",
        ),
        f"{EXP}/calculations/calculations.csv",
    params:
        cli=CLI,
        out=folder(0),
    conda:
        "../../envs/grpo.yaml"
    log:
        f"{EXP}/logs/calculations.log",
    benchmark:
        f"{EXP}/benchmarks/calculations.tsv"
    shell:
        "python {params.cli} calculations {params.out} > {log} 2>&1"
