"""Tests of dpo_grpo.lab.trl_scale: a CPU smoke run of TRL 1.16.0's GRPOTrainer and
DPOTrainer on the tiny random Qwen2 model (no download), with TRL's logged GRPO metrics
checked against this package's recomputation."""

import contextlib
import io
import math
import re

import pytest
import yaml

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from testing_support import record_chinese_misses  # noqa: E402
from dpo_grpo import i18n  # noqa: E402
from dpo_grpo.lab import LabConfig, hf, trl_scale  # noqa: E402


def test_trl_is_the_pinned_version():
    assert trl.__version__ == "1.16.0"


def test_grpo_and_dpo_args_map_the_lab_config_onto_trl_names(tmp_path):
    cfg = LabConfig.preset("cpu")
    g = trl.GRPOConfig(**trl_scale.grpo_args(cfg, tmp_path, use_cpu=True, bf16=False))
    assert g.per_device_train_batch_size == cfg.prompts_per_step * cfg.num_generations
    assert (
        g.max_steps == cfg.grpo_steps * cfg.num_iterations
        and g.num_iterations == cfg.num_iterations
    )
    for lab_name, trl_name in [
        ("epsilon", "epsilon"),
        ("beta", "beta"),
        ("loss_type", "loss_type"),
        ("scale_rewards", "scale_rewards"),
        ("temperature", "temperature"),
        ("max_completion_length", "max_completion_length"),
        ("grpo_lr", "learning_rate"),
        ("use_bias_correction_kl", "use_bias_correction_kl"),
    ]:
        assert getattr(g, trl_name) == getattr(cfg, lab_name), lab_name
    # the lab's scheduler steps once per rollout, TRL's once per optimiser step
    assert cfg.num_iterations > 1
    assert g.warmup_steps == cfg.warmup_steps * cfg.num_iterations
    assert g.lr_scheduler_type == "constant_with_warmup" and not g.sync_ref_model
    d = trl.DPOConfig(
        **trl_scale.dpo_args(cfg, tmp_path, "dpo+nll", use_cpu=True, bf16=False)
    )
    assert d.loss_type == ["sigmoid", "sft"] and d.loss_weights == [
        1.0,
        cfg.dpo_sft_weight,
    ]
    assert d.beta == cfg.dpo_beta and d.max_steps == cfg.dpo_steps
    assert trl.DPOConfig(
        **trl_scale.dpo_args(cfg, tmp_path, "dpo", use_cpu=True, bf16=False)
    ).loss_type == ["sigmoid"]
    names = {row[0] for row in trl_scale.GRPO_NAMES}
    assert {
        "epsilon",
        "beta",
        "loss_type",
        "num_generations",
        "num_iterations",
        "grpo_lr",
    } <= names
    with pytest.raises(ValueError, match="algorithm"):
        trl_scale.dpo_args(cfg, tmp_path, "rft")


def test_grpo_trainer_logs_the_metrics_this_package_recomputes(checkpoint, tmp_path):
    from transformers import AutoModelForCausalLM

    path, tok = checkpoint
    cfg = hf.HFLabConfig.preset(
        "tiny-random",
        n_terms=2,
        n_digits=1,
        n_heldout=10,
        grpo_steps=2,
        grpo_lr=1e-2,
        num_iterations=2,
        num_generations=8,
        prompts_per_step=2,
    )

    def starts_with_digit(
        prompts, completions, **kwargs
    ):  # earned by a random model now and then: mixed groups
        return [1.0 if c[-1]["content"][:1].isdigit() else 0.0 for c in completions]

    weights = [1.0, 0.5]
    rec = trl_scale.GRPORecorder(
        cfg,
        tok,
        [trl_scale.verifier_reward(tok.eos_token_id), starts_with_digit],
        AutoModelForCausalLM.from_pretrained(path),
        reward_weights=weights,
    )
    args = trl.GRPOConfig(
        **trl_scale.grpo_args(
            cfg,
            tmp_path,
            use_cpu=True,
            bf16=False,
            reward_weights=weights,
            seed=0,
            disable_tqdm=True,
        )
    )
    trainer = trl.GRPOTrainer(
        model=str(path),
        reward_funcs=rec.funcs(),
        args=args,
        train_dataset=trl_scale.prompt_dataset(cfg, 16),
        processing_class=tok,
    )
    rec.trainer = trainer
    trainer.add_callback(rec.callback())
    trainer.train()
    rows = rec.compare(trainer.state.log_history)
    # 2 rollouts x num_iterations optimiser steps: the second rollout is sampled from
    # a policy that has moved away from the reference
    assert len(rows) == 2 * 2
    for i, row in enumerate(rows):
        rollout_keys = {"reward", "reward_std", "frac_reward_zero_std"}
        assert (rollout_keys <= set(row)) == (i % 2 == 0), (i, row)
        assert {"loss", "kl", "clip_ratio/region_mean"} <= set(row)
        for name, (theirs, ours) in row.items():
            assert math.isclose(theirs, ours, rel_tol=1e-4, abs_tol=1e-6), (
                i,
                name,
                theirs,
                ours,
            )
    assert rows[0]["kl"] == (0.0, 0.0)  # step 1: policy == reference
    # at a rollout's first step the ratio is 1 and nothing is clipped; at its second
    # the ratios have moved and clipping acts
    assert all(r["clip_ratio/region_mean"][0] == 0.0 for r in rows[0::2])
    assert any(r["clip_ratio/region_mean"][0] > 0.0 for r in rows[1::2])
    assert rows[-1]["kl"][0] > 0 and any(r["reward"][0] > 0 for r in rows[0::2])


def test_dpo_trainer_runs_on_the_labs_pairs_with_the_mapped_loss(checkpoint, tmp_path):
    path, tok = checkpoint
    cfg = LabConfig.preset("cpu", dpo_steps=2, dpo_batch_size=2, warmup_steps=0)
    pairs = {
        "prompts": ["3+5=", "7+8=", "1+2=", "9+9="],
        "chosen": ["8", "15", "3", "18"],
        "rejected": ["9", "5", "4", "8"],
    }
    args = trl.DPOConfig(
        **trl_scale.dpo_args(
            cfg, tmp_path, "dpo", use_cpu=True, bf16=False, disable_tqdm=True
        )
    )
    trainer = trl.DPOTrainer(
        model=str(path),
        args=args,
        train_dataset=trl_scale.preference_dataset(cfg, pairs),
        processing_class=tok,
    )
    trainer.train()
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logged) == 2
    # step 1: policy == reference, margin 0
    assert logged[0]["loss"] == pytest.approx(math.log(2), abs=1e-4)


def test_distributed_configs():
    one = yaml.safe_load(trl_scale.accelerate_config(1, 8, zero_stage=2))
    assert (
        one["distributed_type"] == "DEEPSPEED"
        and one["num_processes"] == 8
        and "main_process_ip" not in one
    )
    # DeepSpeed's settings in one place: the YAML only names the JSON file
    assert one["deepspeed_config"] == {
        "deepspeed_config_file": "ds_config.json",
        "zero3_init_flag": False,
    }
    assert "mixed_precision" not in one
    two = yaml.safe_load(
        trl_scale.accelerate_config(2, 8, zero_stage=3, machine_rank=1)
    )
    assert (
        two["num_processes"] == 16
        and two["machine_rank"] == 1
        and two["deepspeed_config"]["zero3_init_flag"]
        and two["deepspeed_config"]["deepspeed_multinode_launcher"] == "standard"
    )
    ds = trl_scale.deepspeed_config(3)
    assert (
        ds["zero_optimization"]["stage"] == 3
        and ds["train_micro_batch_size_per_gpu"] == "auto"
    )
    with pytest.raises(ValueError, match="zero_stage"):
        trl_scale.deepspeed_config(4)
    with pytest.raises(ValueError, match="machine_rank"):
        trl_scale.accelerate_config(2, 8, machine_rank=2)
    cfg = hf.HFLabConfig.preset("qwen2.5-0.5b")
    args = trl_scale.scaled_grpo_args(cfg, "out", num_processes=8, vllm="server")
    assert (
        args["per_device_train_batch_size"] * 8
        == cfg.prompts_per_step * cfg.num_generations
    )
    assert args["use_vllm"] and args["vllm_mode"] == "server"
    with pytest.raises(ValueError, match="num_processes"):
        trl_scale.scaled_grpo_args(cfg, "out", num_processes=3)


def test_zero_memory_accounting_and_launch_files(tmp_path):
    n = 1_000_000
    assert trl_scale.zero_memory_per_gpu(n, 8, 0) == 16 * n
    assert trl_scale.zero_memory_per_gpu(n, 8, 1) == (4 + 12 / 8) * n
    assert trl_scale.zero_memory_per_gpu(n, 8, 2) == (2 + 14 / 8) * n
    assert trl_scale.zero_memory_per_gpu(n, 8, 3) == 16 / 8 * n
    with pytest.raises(ValueError, match="num_gpus"):
        trl_scale.zero_memory_per_gpu(n, 0, 3)
    files = trl_scale.write_launch_files(
        tmp_path, num_machines=2, gpus_per_machine=4, zero_stage=3
    )
    assert set(files) == {"accelerate.yaml", "ds_config.json", "train_grpo.py"}
    script = files["train_grpo.py"].read_text()
    compile(script, "train_grpo.py", "exec")
    assert "num_processes=8" in script and "GRPOTrainer" in script
    assert yaml.safe_load(files["accelerate.yaml"].read_text())["num_processes"] == 8


def test_trl_scale_functions_reject_bad_input(checkpoint):
    _, tok = checkpoint
    cfg = hf.HFLabConfig.preset("tiny-random")
    with pytest.raises(TypeError, match="cfg"):
        trl_scale.grpo_args("cfg", "out")
    with pytest.raises(ValueError, match="n_prompts"):
        trl_scale.prompt_dataset(cfg, 0)
    with pytest.raises(ValueError, match="pairs"):
        trl_scale.preference_dataset(cfg, {"prompts": ["1+2="], "chosen": []})
    with pytest.raises(TypeError, match="eos_token_id"):
        trl_scale.verifier_reward("eos")
    with pytest.raises(TypeError, match="ref_model"):
        trl_scale.GRPORecorder(cfg, tok, [len], ref_model=None)


@pytest.mark.parametrize("num_machines", [1, 2])
def test_launch_files_pass_accelerates_own_start_up_checks(tmp_path, num_machines):
    """accelerate 1.16's launcher, run on the written files up to the point where it
    would start the processes: parse, validate, export the DeepSpeed environment,
    build the DeepSpeedPlugin that TrainingArguments builds for the script."""
    pytest.importorskip("accelerate")
    files = trl_scale.write_launch_files(
        tmp_path, num_machines=num_machines, gpus_per_machine=8
    )
    for rank in range(num_machines):
        got = trl_scale.check_launch_files(
            tmp_path, machine_rank=rank if num_machines > 1 else None
        )
        # torchrun on every node with its own rank, not pdsh from node 0
        assert got["launcher"] == "torchrun", got
        assert got["nproc_per_node"] == 8 and got["node_rank"] == rank
        assert got["nnodes"] == num_machines
        assert got["zero_stage"] == 2 and not got["zero3_init_flag"]
        assert got["env"]["ACCELERATE_DEEPSPEED_CONFIG_FILE"] == "ds_config.json"
    assert "deepspeed=" not in files["train_grpo.py"].read_text()  # one place
    # the script's global batch over the processes the files start
    n = num_machines * 8
    cfg = hf.HFLabConfig.preset("qwen2.5-0.5b")
    assert f"num_processes={n}" in files["train_grpo.py"].read_text()
    assert trl_scale.scaled_grpo_args(cfg, "out", num_processes=n)[
        "per_device_train_batch_size"
    ] * n == (cfg.prompts_per_step * cfg.num_generations)


def test_launch_check_catches_the_two_start_up_failures(tmp_path):
    """What accelerate refused before: ZeRO settings in the YAML (and a top-level
    mixed_precision) next to a deepspeed= file; several nodes without the standard
    launcher fall back to pdsh."""
    pytest.importorskip("accelerate")
    files = trl_scale.write_launch_files(tmp_path, num_machines=2, gpus_per_machine=8)
    good = files["accelerate.yaml"].read_text()
    files["accelerate.yaml"].write_text(
        good.replace("  deepspeed_multinode_launcher: standard\n", "")
    )
    assert trl_scale.check_launch_files(tmp_path, machine_rank=1)["launcher"] == (
        "deepspeed --launcher pdsh"
    )
    files["accelerate.yaml"].write_text(
        good.replace(
            "  deepspeed_config_file: ds_config.json\n",
            "  zero_stage: 2\n  gradient_accumulation_steps: 1\n",
        )
        + "mixed_precision: bf16\n"
    )
    script = files["train_grpo.py"].read_text()
    assert "vllm='colocate'" in script
    files["train_grpo.py"].write_text(
        script.replace("vllm='colocate'", "vllm='colocate', deepspeed='ds_config.json'")
    )
    with pytest.raises(ValueError, match="deepspeed_config_file"):
        trl_scale.check_launch_files(tmp_path, machine_rank=0)


HAN = re.compile(r"[\u4e00-\u9fff]")


def old_grpo_names_loop(mapped: dict) -> str:
    """The TRL page's loop over GRPO_NAMES, as it was before the table moved into the
    package: the English reference of grpo_names_text."""
    out = [f"{'lab field':<26} {'TRL 1.16.0 GRPOConfig':<38} {'value':>9}  how"]
    for ours, theirs, how in trl_scale.GRPO_NAMES:
        first = theirs.split(",")[0]
        value = mapped.get(first, "")
        out.append(f"{ours:<26} {theirs:<38} {str(value):>9}  {how}")
    return "\n".join(out)


def test_grpo_names_text_in_english_is_what_the_page_printed(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    for cfg in (LabConfig.preset("cpu"), hf.HFLabConfig.preset("qwen2.5-0.5b")):
        mapped = trl_scale.grpo_args(cfg, "out")
        text = trl_scale.grpo_names_text(mapped)
        assert text == old_grpo_names_loop(mapped)
        assert not HAN.search(text)
    with pytest.raises(TypeError, match="args"):
        trl_scale.grpo_names_text(LabConfig.preset("cpu"))
    # the line after the table, as the page printed it
    defaults = {
        f: trl.GRPOConfig.__dataclass_fields__[f].default
        for f in ("beta", "loss_type", "use_bias_correction_kl")
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print("TRL's own defaults that the lab does not use:", defaults)
    assert trl_scale.trl_defaults_text(defaults) + "\n" == out.getvalue()
    with pytest.raises(TypeError, match="defaults"):
        trl_scale.trl_defaults_text(list(defaults))


def test_grpo_names_text_in_chinese_keeps_the_names_and_values(monkeypatch, tmp_path):
    """Under DPO_GRPO_LANG=zh (the Chinese edition runs the same cell) the header and
    every "how" are Chinese, each row keeps its lab field, TRL field and value, and no
    word reaches tr() without a catalog entry."""
    mapped = trl_scale.grpo_args(LabConfig.preset("cpu"), "out")
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    en = trl_scale.grpo_names_text(mapped).splitlines()
    misses = record_chinese_misses(monkeypatch, tmp_path)
    zh = trl_scale.grpo_names_text(mapped).splitlines()
    assert not misses.exists(), misses.read_text(encoding="utf-8")
    assert len(zh) == len(en) == len(trl_scale.GRPO_NAMES) + 1
    assert HAN.search(zh[0]) and "TRL 1.16.0 GRPOConfig" in zh[0]
    # the header's columns start where the rows' do (a Chinese character is two wide)
    head = zh[0][: zh[0].index("TRL 1.16.0")]
    assert i18n.display_width(head) == 26 + 1, zh[0]
    for e, z in zip(en[1:], zh[1:]):
        columns = e[: 26 + 1 + 38 + 1 + 9 + 2]
        assert z.startswith(columns), (e, z)
        assert HAN.search(z[len(columns) :]), z
    defaults = {"beta": 0.0, "loss_type": "dapo"}
    line = trl_scale.trl_defaults_text(defaults)
    assert HAN.search(line) and line.endswith(str(defaults))
    assert not misses.exists(), misses.read_text(encoding="utf-8")


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_trl_shards_the_reference_only_under_zero3(monkeypatch, stage):
    """TRL 1.16.0's own prepare_deepspeed, which GRPOTrainer and DPOTrainer call on
    the reference model, given the page's ds_config: the stage it hands DeepSpeed
    (recorded by a stand-in for deepspeed.initialize) is reference_zero_stage's."""
    import inspect
    import sys
    import types

    from trl.models.utils import prepare_deepspeed

    for trainer in (trl.GRPOTrainer, trl.DPOTrainer):
        src = inspect.getsource(trainer)
        assert "self.ref_model = prepare_deepspeed(self.ref_model" in src, trainer
    seen = []
    fake = types.ModuleType("deepspeed")
    fake.initialize = lambda model, config: (seen.append(config) or model, None)
    monkeypatch.setitem(sys.modules, "deepspeed", fake)
    model = types.SimpleNamespace(
        config=types.SimpleNamespace(hidden_size=8), eval=lambda: None
    )
    plugin = types.SimpleNamespace(deepspeed_config=trl_scale.deepspeed_config(stage))
    accelerator = types.SimpleNamespace(
        state=types.SimpleNamespace(deepspeed_plugin=plugin)
    )
    prepare_deepspeed(model, accelerator)
    assert seen[0]["zero_optimization"]["stage"] == trl_scale.reference_zero_stage(
        stage
    )
    assert trl_scale.reference_zero_stage(stage) == (3 if stage == 3 else 0)
    assert plugin.deepspeed_config["zero_optimization"]["stage"] == stage  # a copy


def test_zero_memory_of_7b_and_70b_policies_on_16_gpus():
    """The page's claims: under ZeRO-2 a 7B policy's state is about 18.7 GiB per GPU
    on 16 GPUs, with TRL's whole reference copy still under half of an 80 GB GPU; a
    70B policy needs stage 3 and even then nearly fills an 80 GB GPU."""
    gib, gpu = 2**30, 80e9 / 2**30  # an "80 GB" GPU holds 74.5 GiB
    mem = lambda n, s, r=False: trl_scale.zero_memory_per_gpu(n, 16, s, r) / gib  # noqa
    b7, b70 = 7_000_000_000, 70_000_000_000
    assert mem(b7, 2) == pytest.approx(18.74, abs=0.005)
    assert mem(b7, 2, True) - mem(b7, 2) == pytest.approx(2 * b7 / gib)  # whole copy
    assert mem(b7, 3, True) - mem(b7, 3) == pytest.approx(2 * b7 / 16 / gib)
    assert mem(b7, 2, True) < gpu / 2
    assert mem(b70, 2) > gpu and gpu - 2 < mem(b70, 3, True) < gpu
    with pytest.raises(ValueError, match="zero_stage"):
        trl_scale.reference_zero_stage(4)


def test_the_launchers_no_is_not_the_runs_precision(tmp_path):
    """check_launch_files reports mixed_precision 'no': the flag accelerate exports
    when the YAML has none. The script's GRPOConfig (bf16=True), on the launched
    node, trains in bf16 and sets ds_config.json's "auto" to true, by the steps
    transformers' TrainingArguments takes under a DeepSpeed launch."""
    import inspect
    import os

    import transformers

    trl_scale.write_launch_files(tmp_path, num_machines=2, gpus_per_machine=8)
    started = trl_scale.check_launch_files(tmp_path, machine_rank=1)
    assert started["mixed_precision"] == "no"
    cfg = hf.HFLabConfig.preset("qwen2.5-0.5b")
    # one process here (its precision does not depend on the number of processes)
    run = trl_scale.scaled_grpo_args(cfg, str(tmp_path / "out"), 1, vllm="colocate")
    assert run["bf16"] is trl_scale.scaled_grpo_args(cfg, "o", 16)["bf16"] is True
    before = dict(os.environ)
    got = trl_scale.deepspeed_precision(
        tmp_path, started["env"], run | {"use_cpu": True}
    )
    assert {k: os.environ.get(k) for k in started["env"]} == {
        k: before.get(k) for k in started["env"]
    }  # restored
    assert got == {
        "launcher": "no",
        "mixed_precision": "bf16",
        "bf16": True,
        "fp16": False,
    }
    # the steps it re-traces, as transformers takes them
    src = inspect.getsource(transformers.TrainingArguments.__post_init__)
    for step in (
        'self.mixed_precision = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")',
        'self.mixed_precision = "bf16"',
        'elif strtobool(os.environ.get("ACCELERATE_USE_DEEPSPEED", "false")):',
        "self.deepspeed_plugin = DeepSpeedPlugin()",
        "self.deepspeed_plugin.set_mixed_precision(self.mixed_precision)",
    ):
        assert step in src, step
