"""Tests of dpo_grpo.lab.verl_mapping: every setting the lab's PPO reads is mapped to
verl, every verl key it names exists in verl's config with the default it states
(the fixture data/verl_fixtures/verl_ppo_trainer_keys.json, read from verl's
generated ppo_trainer.yaml at the commit it names; no network here), and the printed
commands pass verl's start-up checks at that commit (start_up_check)."""

import ast
import dataclasses
import json
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from testing_support import record_chinese_misses
from dpo_grpo.data import __file__ as data_init
from dpo_grpo.lab import (
    PPO_FIELDS,
    LabConfig,
    ppo,
)
from dpo_grpo.lab import verl_mapping as vm

FIXTURE = json.loads(
    (Path(data_init).parent / "verl_fixtures" / "verl_ppo_trainer_keys.json").read_text(
        encoding="utf-8"
    )
)
#: LabConfig fields the PPO run reads outside lab/ppo.py (its optimiser, scheduler,
#: step count, sampler and reward)
READ_ELSEWHERE = {
    "grpo_steps",
    "weight_decay",
    "warmup_steps",
    "max_completion_length",
    "reward",
    "length_bonus",
}


def _fields_ppo_reads() -> set:
    tree = ast.parse(Path(ppo.__file__).read_text(encoding="utf-8"))
    fields = {f.name for f in dataclasses.fields(LabConfig)}
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in fields
        and (
            (isinstance(node.value, ast.Name) and node.value.id == "cfg")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "cfg")
        )
    }


def _mapped(rows) -> set:
    return {name.strip() for row in rows for name in row[0].split(",")}


def test_every_setting_the_labs_ppo_reads_is_mapped():
    read = _fields_ppo_reads() | READ_ELSEWHERE
    assert set(PPO_FIELDS) <= read and {"epsilon", "beta", "gae_lambda"} <= read
    missing = read - _mapped(vm.PPO_TO_VERL)
    assert not missing, f"lab PPO settings without a verl row: {sorted(missing)}"
    for name, keys, how in vm.PPO_TO_VERL:
        assert how and (keys or "None only" in how), name


def test_every_verl_key_exists_in_verls_config_with_the_stated_default():
    assert FIXTURE["verl_commit"] == vm.VERL_COMMIT
    assert FIXTURE["verl_version"] == vm.VERL_VERSION
    known = FIXTURE["keys"]
    cfg = LabConfig.preset("cpu")
    named = set(vm.VERL_DEFAULTS) | set(vm.VERL_PATH_KEYS)
    for rows in (vm.PPO_TO_VERL, vm.GRPO_TO_VERL):
        named |= {k for _, keys, _ in rows for k in keys}
    for critic in (True, False):
        named |= set(vm.run_overrides(vm.verl_overrides(cfg, critic=critic)))
    assert not named - set(known), sorted(named - set(known))
    for key, default in vm.VERL_DEFAULTS.items():
        assert known[key] == default, (key, known[key], default)
    # every key the overrides set has its verl default on record
    assert set(vm.verl_overrides(cfg)) <= set(vm.VERL_DEFAULTS)


def test_ppo_overrides_carry_the_labs_values():
    cfg = LabConfig.preset("cpu", critic_lr=1e-4, epsilon_high=0.28, delta=2.0)
    o = vm.verl_overrides(cfg)
    a, c = "actor_rollout_ref.actor.", "critic."
    assert o["algorithm.adv_estimator"] == "gae"
    assert o["algorithm.lam"] == cfg.gae_lambda and o["algorithm.gamma"] == cfg.gamma
    assert o["algorithm.use_kl_in_reward"] and not o[a + "use_kl_loss"]
    assert o["algorithm.kl_penalty"] == "kl"  # k1, as the lab's token_rewards
    assert o["algorithm.kl_ctrl.kl_coef"] == cfg.beta
    assert o[c + "cliprange_value"] == cfg.cliprange_value
    assert o[c + "optim.lr"] == 1e-4 and o[a + "optim.lr"] == cfg.grpo_lr
    assert o[a + "clip_ratio_low"] == o[a + "clip_ratio"] == cfg.epsilon
    assert o[a + "clip_ratio_high"] == 0.28 and o[a + "clip_ratio_c"] == 2.0
    n = cfg.prompts_per_step * cfg.num_generations
    assert o["data.train_batch_size"] == n and o["actor_rollout_ref.rollout.n"] == 1
    assert o[a + "ppo_mini_batch_size"] == o[c + "ppo_mini_batch_size"] == n
    assert o[a + "ppo_epochs"] == o[c + "ppo_epochs"] == cfg.num_iterations
    assert o[c + "grad_clip"] == pytest.approx(cfg.max_grad_norm / cfg.vf_coef)
    assert o[a + "optim.weight_decay"] == cfg.weight_decay == 0.0
    assert o[a + "optim.lr_warmup_steps"] == cfg.warmup_steps
    assert o["trainer.total_training_steps"] == cfg.grpo_steps
    # defaults: critic_lr None -> grpo_lr, delta None -> a bound that never acts
    d = vm.verl_overrides(LabConfig.preset("cpu"))
    assert d[c + "optim.lr"] == cfg.grpo_lr
    assert d[a + "clip_ratio_c"] == vm.NO_DUAL_CLIP
    assert d[a + "clip_ratio_high"] == cfg.epsilon
    assert not vm.verl_overrides(LabConfig.preset("cpu", beta=0.0))[
        "algorithm.use_kl_in_reward"
    ]


def test_critic_off_is_grpo_with_no_critic_keys():
    cfg = LabConfig.preset("cpu")
    o = vm.verl_overrides(cfg, critic=False)
    a = "actor_rollout_ref.actor."
    assert o["algorithm.adv_estimator"] == "grpo"
    assert not [k for k in o if k.startswith("critic.")]
    assert o["data.train_batch_size"] == cfg.prompts_per_step
    assert o["actor_rollout_ref.rollout.n"] == cfg.num_generations
    assert o[a + "use_kl_loss"] and o[a + "kl_loss_coef"] == cfg.beta
    assert o[a + "kl_loss_type"] == "low_var_kl" and not o["algorithm.use_kl_in_reward"]
    assert o[a + "loss_agg_mode"] == "seq-mean-token-mean"  # loss_type "grpo"
    assert o["algorithm.norm_adv_by_std_in_grpo"]
    src = FIXTURE["source_checked"]
    assert any("need_critic" in where for where in src.values())


def test_critic_gradient_clip_stands_for_vf_coef():
    """AdamW on vf_coef * loss clipped at max_grad_norm takes the step of AdamW on the
    unweighted loss clipped at max_grad_norm / vf_coef (up to Adam's eps)."""
    cfg = LabConfig.preset("cpu")
    clip = vm.verl_overrides(cfg)["critic.grad_clip"]
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 4, generator=gen), torch.randn(16, generator=gen)
    w0 = torch.randn(4, generator=gen) * 3  # large errors at first: clipped
    out = []
    for weight, max_norm in ((cfg.vf_coef, cfg.max_grad_norm), (1.0, clip)):
        w = w0.clone().requires_grad_(True)
        opt = torch.optim.AdamW([w], lr=0.5, weight_decay=0.0, eps=1e-12)
        clipped = []
        for _ in range(40):
            opt.zero_grad()
            (weight * ((x @ w - y) ** 2).mean()).backward()
            norm = float(torch.nn.utils.clip_grad_norm_([w], max_norm))
            clipped.append(norm > max_norm)
            opt.step()
        assert any(clipped) and not all(clipped), clipped  # clipping acts, then not
        out.append(w.detach())
    torch.testing.assert_close(out[0], out[1], rtol=1e-5, atol=1e-6)


def test_verl_mapping_rejects_what_verl_cannot_express():
    with pytest.raises(TypeError, match="cfg"):
        vm.verl_overrides("cfg")
    with pytest.raises(TypeError, match="critic"):
        vm.verl_overrides(LabConfig.preset("cpu"), critic="no")
    with pytest.raises(ValueError, match="ref_sync_steps"):
        vm.verl_overrides(LabConfig.preset("cpu", ref_sync_steps=4))
    with pytest.raises(ValueError, match="scale_rewards"):
        vm.verl_overrides(LabConfig.preset("cpu", scale_rewards="batch"), critic=False)
    with pytest.raises(TypeError, match="overrides"):
        vm.verl_command(["a=1"])
    text = vm.verl_command({"a.b": True, "c": None, "d": 0.5, "e": ["x"]}, check=False)
    assert text.splitlines() == [
        "python3 -m verl.trainer.main_ppo \\",
        "    a.b=true \\",
        "    c=null \\",
        "    d=0.5 \\",
        """    e='["x"]'""",
    ]
    with pytest.raises(ValueError, match="not in the config"):
        vm.verl_command({"a.b": True})


def parse_command(text: str) -> dict:
    """The overrides of a printed ``main_ppo`` command, as Hydra reads them (the shell's
    quotes removed; true/false/null, numbers, a JSON list)."""
    lines = [line.strip().removesuffix("\\").strip() for line in text.splitlines()]
    assert lines[0] == "python3 -m verl.trainer.main_ppo", lines[0]
    out = {}
    for line in lines[1:]:
        key, _, raw = line.partition("=")
        if raw.startswith("'"):
            out[key] = json.loads(raw.strip("'"))
        else:
            out[key] = vm._literal(raw)
    return out


@pytest.mark.parametrize("critic", [True, False])
def test_the_printed_commands_pass_verls_start_up_checks(critic):
    """The page's commands, parsed back as Hydra reads them: every key in verl's
    recorded config, the paths, GPUs and micro-batch sizes set, and verl's start-up
    checks at the recorded commit (re-implemented in start_up_check) pass. The lab's
    settings alone (verl_overrides) are refused, as verl refused them."""
    cfg = LabConfig.preset("cpu")
    lab = vm.verl_overrides(cfg, critic=critic)
    with pytest.raises(ValueError, match="rollout.name is required"):
        vm.start_up_check(lab)
    named = lab | {"actor_rollout_ref.rollout.name": "vllm"}
    with pytest.raises(ValueError, match="ppo_micro_batch_size"):
        vm.start_up_check(named)
    with pytest.raises(ValueError, match="would refuse"):
        vm.verl_command(lab)
    run = vm.run_overrides(lab, n_gpus_per_node=8, nnodes=2)
    printed = parse_command(vm.verl_command(run))
    assert printed == run
    assert not set(printed) - set(FIXTURE["keys"])
    assert {k: printed[k] for k in lab} == lab  # the lab's settings unchanged
    assert set(vm.VERL_PATH_KEYS) <= set(vm.PLACEHOLDERS)
    paths = {k for k in vm.PLACEHOLDERS if critic or not k.startswith("critic.")}
    for key in paths:
        assert printed[key] == vm.PLACEHOLDERS[key], key
    for key in ("actor_rollout_ref.model.path", "data.train_files", "data.val_files"):
        assert printed[key].startswith("$"), key
    assert ("critic.model.path" in printed) == critic
    assert printed["trainer.n_gpus_per_node"] == 8 and printed["trainer.nnodes"] == 2
    got = vm.start_up_check(printed)
    n = cfg.prompts_per_step * cfg.num_generations
    assert got == {
        "n_gpus": 16,
        "actor_mini_per_gpu": n // 16,
        "critic_mini_per_gpu": n // 16 if critic else None,
        "critic": critic,
        "reference": True,
    }


def test_start_up_check_refuses_what_verl_refuses():
    """Each refusal of verl's validate_config, ActorConfig/CriticConfig and the FSDP
    workers' normalisation at the recorded commit, on a complete run changed in one
    place."""
    run = vm.run_overrides(vm.verl_overrides(LabConfig.preset("cpu")))  # 128 a step
    a, c = "actor_rollout_ref.actor.", "critic."
    refused = {
        "not in the config": {"critic.model.pth": "x"},
        "divisible by 48": {"trainer.n_gpus_per_node": 48},  # 128 over 48 GPUs
        "set at least one": {c + "ppo_micro_batch_size_per_gpu": None},
        "both": {a + "ppo_micro_batch_size": 8},
        "should be divisible by ppo_micro_batch_size_per_gpu 3": {
            a + "ppo_micro_batch_size_per_gpu": 3
        },
        "train_batch_size \\(128\\) < critic": {c + "ppo_mini_batch_size": 256},
        "0 per GPU": {a + "ppo_mini_batch_size": 4},
        "loss_agg_mode": {a + "loss_agg_mode": "sum"},
        "log_prob_micro_batch_size": {
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": None
        },
        "world size": {"actor_rollout_ref.rollout.tensor_model_parallel_size": 3},
    }
    for why, change in refused.items():
        with pytest.raises(ValueError, match=why):
            vm.start_up_check(run | change)
    # dynamic batch sizes lift the micro-batch requirements, as in verl
    dyn = {k: x for k, x in run.items() if "micro_batch" not in k}
    assert vm.start_up_check(dyn | {a + "use_dynamic_bsz": True})["critic"]
    # the critic's per-GPU micro-batch defaults to its global one (an interpolation):
    # a global one alone counts as both
    bare = {k: x for k, x in run.items() if k != c + "ppo_micro_batch_size_per_gpu"}
    with pytest.raises(ValueError, match="both"):
        vm.start_up_check(bare | {c + "ppo_micro_batch_size": 16})
    # a deprecated global micro-batch, divided over the GPUs
    old = {k: x for k, x in run.items() if k != a + "ppo_micro_batch_size_per_gpu"}
    assert vm.start_up_check(old | {a + "ppo_micro_batch_size": 32})
    with pytest.raises(ValueError, match="x sp"):
        vm.start_up_check(old | {a + "ppo_micro_batch_size": 4})
    with pytest.raises(ValueError, match="micro_batch_size_per_gpu"):
        vm.run_overrides(run, micro_batch_size_per_gpu=0)


HAN = re.compile(r"[\u4e00-\u9fff]")


def old_mapping_loop(ppo_over: dict) -> str:
    """The TRL page's loop over PPO_TO_VERL, as it was before the table moved into the
    package: the English reference of mapping_text."""
    out = [f"verl {vm.VERL_VERSION}, commit {vm.VERL_COMMIT[:10]}"]
    for ours, keys, how in vm.PPO_TO_VERL:
        out.append(f"{ours}: {how}")
        for key in keys:
            if key in ppo_over:
                default = vm.VERL_DEFAULTS[key]
                out.append(f"    {key} = {ppo_over[key]}  (verl's default: {default})")
            else:
                out.append(f"    {key}  (a path of your own)")
    return "\n".join(out)


def test_mapping_text_in_english_is_what_the_page_printed(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    for cfg in (
        LabConfig.preset("cpu"),
        LabConfig.preset("cpu", critic_lr=1e-4, epsilon_high=0.28, delta=2.0),
    ):
        over = vm.verl_overrides(cfg)
        text = vm.mapping_text(over)
        assert text == old_mapping_loop(over)
        assert not HAN.search(text)
    with pytest.raises(TypeError, match="overrides"):
        vm.mapping_text(LabConfig.preset("cpu"))


def test_mapping_text_in_chinese_keeps_the_keys_and_values(monkeypatch, tmp_path):
    """Under DPO_GRPO_LANG=zh (the Chinese edition runs the same cell) every setting's
    "how" is Chinese, as are the settings in parentheses (behaviours, not fields); the
    field names, verl keys, values and defaults stay; no word reaches tr() without a
    catalog entry."""
    over = vm.verl_overrides(LabConfig.preset("cpu"))
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    en = vm.mapping_text(over).splitlines()
    misses = record_chinese_misses(monkeypatch, tmp_path)
    zh = vm.mapping_text(over).splitlines()
    assert not misses.exists(), misses.read_text(encoding="utf-8")
    assert len(zh) == len(en)
    assert HAN.search(zh[0])
    assert vm.VERL_VERSION in zh[0] and vm.VERL_COMMIT[:10] in zh[0]
    rows = iter(vm.PPO_TO_VERL)
    for e, z in zip(en[1:], zh[1:]):
        if not e.startswith("    "):  # a setting and how it maps
            ours, _, how = next(rows)
            if ours.startswith("("):
                assert HAN.search(z.split(":")[0].split("：")[0]), z
            else:
                assert z.startswith(f"{ours}: "), z
            assert how == "0" or HAN.search(z), z
            continue
        key = e.split()[0]
        assert z.startswith(f"    {key} "), z
        if key in over:
            assert f"{key} = {over[key]}  " in z, z
            assert str(vm.VERL_DEFAULTS[key]) in z.split(f"= {over[key]}", 1)[1], z
        assert HAN.search(z), z
