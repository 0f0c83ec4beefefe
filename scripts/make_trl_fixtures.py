"""Produce the TRL parity fixtures (``code/dpo_grpo/data/trl_fixtures/`` holds the
shipped ones) by running TRL 1.16.0's own trainer methods.

Run with the optional TRL environment (``requirements-trl.txt``), offline, on CPU, in
well under a minute::

    # writes ./trl_fixtures/trl_*.json (6) in the working directory
    .venv-trl/bin/python scripts/make_trl_fixtures.py
    # writes DIR/trl_*.json instead
    .venv-trl/bin/python scripts/make_trl_fixtures.py --out DIR
    # refreshes the shipped fixtures (from the repository root): only when named
    .venv-trl/bin/python scripts/make_trl_fixtures.py \
        --out code/dpo_grpo/data/trl_fixtures

Nothing here re-types TRL's formulas. Each fixture value is what a real TRL trainer
object returned or logged:

* ``trl_grpo_loss.json``: ``GRPOTrainer._compute_loss(model, inputs)``. One real
  ``GRPOTrainer`` per case, built from a ``GRPOConfig`` holding the case's options. The
  only patch is on the instance: ``_get_per_token_logps_and_entropies`` returns a
  float64 leaf tensor ``new_logps`` that we choose (instead of running the model), so
  ``loss.backward()`` gives d loss / d new_logps. The clip/KL metrics are read from
  ``trainer._metrics["train"]``.
* ``trl_advantages.json``: ``GRPOTrainer._generate_and_score_completions(inputs)``, the
  real method. The instance's ``_generate_single_turn`` is patched to return fixed
  completion ids (no sampling). The rewards come from two ordinary reward functions
  passed to the trainer, which return the fixture table (``None`` where the table holds
  NaN); TRL's own ``_calculate_rewards`` turns them into the float32
  ``rewards_per_func`` tensor. The advantages are the method's ``output["advantages"]``;
  ``reward``, ``reward_std`` and ``frac_reward_zero_std`` are read from
  ``trainer._metrics["train"]``.
* ``trl_dpo_loss.json``:
  ``DPOTrainer._compute_loss(model, inputs, return_outputs=False)``, with a stub policy
  module in place of the fused-LM-head forward: it returns per-token log-probs that we
  choose (a float64 leaf), plus the ``entropy``/``mean_logits``/``is_top1`` fields the
  method logs. The reference log-probs are fed as precomputed
  ``ref_chosen_logps``/``ref_rejected_logps`` (``trainer.precompute_ref_logps = True``).
  Each sequence log-prob is a sum of per-token log-probs that are multiples of 2**-10,
  so TRL's sum equals the stored sequence value exactly.
* ``trl_grpo_loss_types.json``: as ``trl_grpo_loss.json``, for TRL's newer loss types
  ``cispo``, ``sapo``, ``luspo`` and ``vespo`` (both importance-sampling levels, beta 0
  and 0.04, bias-corrected KL, on-policy, ratios far from 1, (B, T) advantages,
  accumulation, non-default SAPO/VESPO options, CISPO caps).
* ``trl_dpo_loss_family.json``: as ``trl_dpo_loss.json``, for every
  ``DPOConfig.loss_type`` and for lists combined with ``loss_weights``; the records add
  the completion token counts (``ipo``, ``sigmoid_norm`` and ``sft`` read them). For
  ``sft`` the gradient reaches only the chosen rows' valid tokens; each gets d loss / d
  (sequence log-prob), which is what is stored.

* ``trl_rloo.json``: ``RLOOTrainer._generate_and_score_completions(inputs)`` (instance
  patches: fixed completion ids; ``_get_per_token_logps_and_entropies`` returns chosen
  old log-probs for the policy and ref log-probs for ``trainer.ref_model``), then
  ``RLOOTrainer._compute_loss`` on that output with a float64 ``new_logps`` leaf: the
  k1-penalised rewards' leave-one-out advantages, the clipped sequence-ratio loss, its
  gradient and the clip metrics, for ``chapters.variants.rloo_loss``.

``--only FILE ...`` writes a subset (e.g. only the two newer files).

The model is a randomly initialised 2-layer Llama with hidden size 16 and a 32-word
WordLevel tokenizer, both built here from configs and saved to a temporary folder
(``HF_HUB_OFFLINE=1``; nothing is downloaded). Its weights never enter a fixture value.
All inputs come from ``numpy.random.default_rng`` with fixed seeds; running the script
twice gives byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import tempfile
import warnings
from pathlib import Path
from types import SimpleNamespace

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import torch  # noqa: E402

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import datasets  # noqa: E402
import transformers  # noqa: E402
import trl  # noqa: E402
from datasets import Dataset  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from trl import DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer  # noqa: E402

datasets.disable_progress_bars()
transformers.utils.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

EXPECTED_TRL = "1.16.0"
GENERATED_BY = "scripts/make_trl_fixtures.py"

# GRPO loss inputs: B sequences of T completion tokens.
B, T = 6, 7
EPSILON = 0.2
CLIP_METRICS = (
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "clip_ratio/low_min",
    "clip_ratio/high_max",
)
# The metrics TRL 1.16.0 logs per loss type (besides kl when beta != 0).
LOSS_TYPE_METRICS = {
    **{t: CLIP_METRICS for t in ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")},
    "cispo": ("cispo_clip_ratio",),
    "sapo": (),
    "vespo": ("vespo/phi_seq_mean",),
}
NEW_LOSS_TYPE_OPTIONS = (
    "sapo_temperature_pos",
    "sapo_temperature_neg",
    "vespo_k_pos",
    "vespo_lambda_pos",
    "vespo_k_neg",
    "vespo_lambda_neg",
)
# Advantage inputs: N rows in groups of G, K reward functions.
N_ROWS, G, K = 16, 4, 2
SCALE_REWARDS = ("group", "batch", "none", True, False)
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")
# DPO inputs: P pairs, completions of L tokens (after the prompt).
P_PAIRS, DPO_PROMPT, DPO_COMPLETION = 6, 2, 10


# --------------------------------------------------------------------------------------
# Offline model, tokenizer and trainers
# --------------------------------------------------------------------------------------


def build_model_dir(root: Path) -> str:
    """Save a tiny random Llama and a WordLevel tokenizer to ``root/tiny-llama``; return
    that path."""
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{f"w{i}": i + 3 for i in range(29)}}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    path = root / "tiny-llama"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


class Env:
    """The shared offline pieces: model path, tokenizer, datasets, a scratch output
    folder."""

    def __init__(self, root: Path):
        self.root = root
        self.model_path = build_model_dir(root)
        self.tokenizer = PreTrainedTokenizerFast.from_pretrained(self.model_path)
        self.grpo_dataset = Dataset.from_dict(
            {"prompt": [f"w{i} w{i + 1}" for i in range(8)], "row": list(range(8))}
        )
        self.dpo_dataset = Dataset.from_dict(
            {
                "prompt": ["w1 w2", "w3 w4", "w5 w6", "w7 w8"],
                "chosen": [" w9 w10", " w11", " w12 w13 w14", " w15"],
                "rejected": [" w16", " w17 w18", " w19", " w20 w21"],
            }
        )

    def grpo_trainer(self, reward_funcs, **config) -> GRPOTrainer:
        args = GRPOConfig(
            output_dir=str(self.root / "out"),
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            logging_strategy="no",
            seed=0,
            **config,
        )
        trainer = GRPOTrainer(
            model=self.model_path,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=self.grpo_dataset,
            processing_class=self.tokenizer,
        )
        # metrics go to trainer._metrics["train"]; the "train" normalisers apply
        trainer.model.train()
        return trainer

    def dpo_trainer(self, **config) -> DPOTrainer:
        args = DPOConfig(
            output_dir=str(self.root / "out"),
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            logging_strategy="no",
            seed=0,
            per_device_train_batch_size=P_PAIRS,
            **config,
        )
        trainer = DPOTrainer(
            model=self.model_path,
            args=args,
            train_dataset=self.dpo_dataset,
            processing_class=self.tokenizer,
        )
        trainer.model.train()
        return trainer


def _zero_reward(prompts, completions, **kwargs):
    return [0.0] * len(prompts)


def floats(x):
    """A tensor/array as nested lists of Python floats (JSON writes them with repr: full
    precision)."""
    return np.asarray(
        x.detach().cpu().numpy() if torch.is_tensor(x) else x, dtype=np.float64
    ).tolist()


def nan_to_null(rows):
    return [[None if math.isnan(v) else v for v in row] for row in rows]


def last_metric(trainer, name):
    values = trainer._metrics["train"][name]
    if len(values) != 1:
        raise RuntimeError(
            f"expected exactly one logged value for {name!r}, got {values!r}"
        )
    return float(values[0])


# --------------------------------------------------------------------------------------
# GRPO loss: GRPOTrainer._compute_loss
# --------------------------------------------------------------------------------------


def grpo_inputs(
    seed,
    *,
    adv_2d=False,
    importance_sampling_level="token",
    epsilon_high=0.28,
    delta=None,
    sigma=0.25,
):
    """Draw one batch; retry seeds (deterministically) until every clipping region of
    interest is populated."""
    for attempt in range(10_000):
        rng = np.random.default_rng([seed, attempt])
        lengths = rng.permutation(
            np.concatenate([[T, T, 1], rng.integers(1, T + 1, size=B - 3)])
        )
        mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.int64)
        valid = mask.astype(bool)
        old = np.log(rng.uniform(0.05, 0.9, size=(B, T)))
        new = old + rng.normal(0.0, sigma, size=(B, T))
        ref = np.log(rng.uniform(0.05, 0.9, size=(B, T)))
        signs = rng.permutation([1.0, 1.0, 1.0, -1.0, -1.0, -1.0])
        adv = signs * (np.abs(rng.normal(0.0, 1.0, size=B)) + 0.05)
        if adv_2d:
            adv = adv[:, None] * rng.uniform(0.5, 1.5, size=(B, T))
            adv[1, 0] = 0.0  # one exact zero advantage on a valid token
        # Padding holds finite garbage: TRL must ignore it.
        for arr in (new, old, ref):
            arr[~valid] = rng.uniform(-30.0, 30.0, size=int((~valid).sum()))
        if adv_2d:
            adv[~valid] = rng.uniform(-3.0, 3.0, size=int((~valid).sum()))
        # Short decimals keep the JSON small; TRL consumes exactly these rounded values.
        new, old, ref, adv = (np.round(x, 6) for x in (new, old, ref, adv))

        if importance_sampling_level == "token":
            ratio = np.exp(new - old)
            a = adv if adv_2d else np.broadcast_to(adv[:, None], (B, T))
            sel = valid
        else:
            ratio = np.exp(((new - old) * mask).sum(1) / mask.sum(1))
            # row-level sign is enough to check coverage
            a = adv[:, 0] if adv_2d else adv
            sel = np.ones(B, dtype=bool)
        r, a = ratio[sel], a[sel]
        low, high = r < 1 - EPSILON, r > 1 + epsilon_high
        # both clip platforms are hit
        checks = [
            (low & (a < 0)).any(),
            (high & (a > 0)).any(),
        ]
        if importance_sampling_level == "token":
            checks += [
                (low & (a > 0)).any(),
                (high & (a < 0)).any(),  # and the unclipped "wrong side" too
                (r > 1 + 0.28).any() and (r > 1.2).any(),
            ]
        if delta is not None:
            # delta actually caps an active ratio
            checks.append(((r > delta) & (a < 0)).any())
        if all(checks):
            return {
                "new": new,
                "old": old,
                "ref": ref,
                "adv": adv,
                "mask": mask,
                "seed": [seed, attempt],
            }
    raise RuntimeError(f"no seed found for case seed {seed}")


def run_grpo_case(
    env,
    name,
    seed,
    *,
    loss_type,
    importance_sampling_level="token",
    beta=0.0,
    use_bias_correction_kl=False,
    epsilon_high=0.28,
    delta=None,
    max_completion_length=T,
    gradient_accumulation_steps=1,
    steps_per_generation=None,
    num_items_extra=0,
    num_items_factor=1,
    on_policy=False,
    adv_2d=False,
    sigma=0.25,
    inputs_epsilon_high=None,
    loss_type_options=None,
):
    """One ``GRPOTrainer._compute_loss`` call. ``loss_type_options``: None for the
    original four loss types (their records stay as they were); a dict of SAPO/VESPO
    ``GRPOConfig`` fields (possibly empty) for the newer types, whose records then list
    every such option as TRL read it."""
    data = grpo_inputs(
        seed,
        adv_2d=adv_2d,
        importance_sampling_level=importance_sampling_level,
        epsilon_high=epsilon_high
        if inputs_epsilon_high is None
        else inputs_epsilon_high,
        delta=delta,
        sigma=sigma,
    )
    config = dict(
        per_device_train_batch_size=B,
        num_generations=2,
        max_completion_length=max_completion_length,
        loss_type=loss_type,
        importance_sampling_level=importance_sampling_level,
        beta=beta,
        use_bias_correction_kl=use_bias_correction_kl,
        epsilon=EPSILON,
        epsilon_high=epsilon_high,
        delta=delta,
        gradient_accumulation_steps=gradient_accumulation_steps,
    )
    if steps_per_generation is not None:
        config["steps_per_generation"] = steps_per_generation
    config.update(loss_type_options or {})
    trainer = env.grpo_trainer([_zero_reward], **config)
    # The HF training loop sets this before each optimisation step; a full window uses
    # the configured value.
    trainer.current_gradient_accumulation_steps = gradient_accumulation_steps

    new_leaf = torch.tensor(data["new"], dtype=torch.float64, requires_grad=True)
    entropies = torch.zeros(B, T, dtype=torch.float64)

    def fake_logps_and_entropies(
        model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
    ):
        assert logits_to_keep == T and input_ids.shape[0] == B
        return new_leaf, entropies, None

    trainer._get_per_token_logps_and_entropies = fake_logps_and_entropies

    mask = torch.tensor(data["mask"], dtype=torch.long)
    num_items = int(data["mask"].sum()) * num_items_factor + num_items_extra
    inputs = {
        "prompt_ids": torch.full((B, 2), 5, dtype=torch.long),
        "prompt_mask": torch.ones(B, 2, dtype=torch.long),
        "completion_ids": torch.where(mask.bool(), 7, 0),
        "completion_mask": mask,
        "advantages": torch.tensor(data["adv"], dtype=torch.float64),
        "num_items_in_batch": torch.tensor(num_items),
    }
    if not on_policy:
        inputs["old_per_token_logps"] = torch.tensor(data["old"], dtype=torch.float64)
    if beta != 0.0:
        inputs["ref_per_token_logps"] = torch.tensor(data["ref"], dtype=torch.float64)

    loss = trainer._compute_loss(trainer.model, inputs)
    loss.backward()
    assert loss.dtype == torch.float64

    metrics = {m: last_metric(trainer, m) for m in LOSS_TYPE_METRICS[loss_type]}
    if beta != 0.0:
        metrics["kl"] = last_metric(trainer, "kl")
    elif "kl" in trainer._metrics["train"]:
        raise RuntimeError("TRL logged kl with beta == 0")

    options = {
        "loss_type": trainer.loss_type,
        "importance_sampling_level": trainer.importance_sampling_level,
        "beta": trainer.beta,
        "use_bias_correction_kl": trainer.args.use_bias_correction_kl,
        "epsilon": trainer.epsilon_low,
        "epsilon_high": trainer.epsilon_high,
        "delta": trainer.args.delta,
        "max_completion_length": trainer.max_completion_length,
        "num_items_in_batch": num_items,
        "gradient_accumulation_steps": trainer.current_gradient_accumulation_steps,
        "steps_per_generation": trainer.args.steps_per_generation,
        "num_processes": trainer.accelerator.num_processes,
    }
    if loss_type_options is not None:
        options.update({k: getattr(trainer.args, k) for k in NEW_LOSS_TYPE_OPTIONS})
    return {
        "name": name,
        "seed": data["seed"],
        "options": options,
        "inputs": {
            "new_logps": floats(data["new"]),
            "old_logps": None if on_policy else floats(data["old"]),
            "ref_logps": floats(data["ref"]) if beta != 0.0 else None,
            "advantages": floats(data["adv"]),
            "mask": data["mask"].tolist(),
        },
        "loss": float(loss.item()),
        "grad_new_logps": floats(new_leaf.grad),
        "metrics": metrics,
    }


def grpo_cases(env):
    cases = []
    seed = 100
    for loss_type in ("grpo", "bnpo", "dr_grpo", "dapo"):
        for level in ("token", "sequence"):
            for beta in (0.0, 0.04):
                for bias in (False, True):
                    for eps_high in (0.2, 0.28):
                        seed += 1
                        name = (
                            f"{loss_type}-{level}-beta{beta}-"
                            f"bias{int(bias)}-epshigh{eps_high}"
                        )
                        cases.append(
                            run_grpo_case(
                                env,
                                name,
                                seed,
                                loss_type=loss_type,
                                importance_sampling_level=level,
                                beta=beta,
                                use_bias_correction_kl=bias,
                                epsilon_high=eps_high,
                            )
                        )
    # Two-sided clipping (delta caps the unclipped branch).
    for loss_type, level, beta in (
        ("grpo", "token", 0.0),
        ("bnpo", "token", 0.04),
        ("dr_grpo", "token", 0.0),
        ("dapo", "token", 0.04),
        ("grpo", "sequence", 0.0),
    ):
        seed += 1
        cases.append(
            run_grpo_case(
                env,
                f"delta1.5-{loss_type}-{level}-beta{beta}",
                seed,
                loss_type=loss_type,
                importance_sampling_level=level,
                beta=beta,
                delta=1.5,
            )
        )
    # Dr. GRPO's constant normaliser B * max_completion_length with
    # max_completion_length > T.
    for level, beta in (("token", 0.0), ("token", 0.04), ("sequence", 0.04)):
        seed += 1
        cases.append(
            run_grpo_case(
                env,
                f"dr_grpo-maxlen16-{level}-beta{beta}",
                seed,
                loss_type="dr_grpo",
                importance_sampling_level=level,
                beta=beta,
                max_completion_length=16,
            )
        )
    # On-policy: no old_per_token_logps in the inputs, TRL uses new.detach() (every
    # ratio is exactly 1).
    for loss_type, level, beta, bias in (
        ("grpo", "token", 0.04, False),
        ("bnpo", "token", 0.04, True),
        ("dr_grpo", "token", 0.0, False),
        ("dapo", "token", 0.04, True),
        ("grpo", "sequence", 0.04, True),
    ):
        seed += 1
        cases.append(
            run_grpo_case(
                env,
                f"onpolicy-{loss_type}-{level}-beta{beta}-bias{int(bias)}",
                seed,
                loss_type=loss_type,
                importance_sampling_level=level,
                beta=beta,
                use_bias_correction_kl=bias,
                on_policy=True,
            )
        )
    # Gradient accumulation.
    for loss_type in ("grpo", "bnpo", "dr_grpo"):
        seed += 1
        cases.append(
            run_grpo_case(
                env,
                f"gas2-{loss_type}",
                seed,
                loss_type=loss_type,
                beta=0.04,
                gradient_accumulation_steps=2,
            )
        )
    # DAPO: num_items_in_batch counts the whole generation batch (steps_per_generation
    # micro-batches).
    for name, kw in (
        (
            "gas2-spg2-dapo-items2x",
            dict(gradient_accumulation_steps=2, num_items_factor=2),
        ),
        ("gas2-spg1-dapo", dict(gradient_accumulation_steps=2, steps_per_generation=1)),
        (
            "gas1-spg2-dapo-items2x",
            dict(
                gradient_accumulation_steps=1,
                steps_per_generation=2,
                num_items_factor=2,
            ),
        ),
        ("gas1-dapo-items-plus9", dict(num_items_extra=9)),
        (
            "gas2-spg2-dapo-sequence-items-plus5",
            dict(
                gradient_accumulation_steps=2,
                num_items_factor=2,
                num_items_extra=5,
                importance_sampling_level="sequence",
            ),
        ),
    ):
        seed += 1
        cases.append(run_grpo_case(env, name, seed, loss_type="dapo", beta=0.04, **kw))
    # (B, T) advantages (subclasses may pass per-token advantages).
    for loss_type, level, beta in (
        ("grpo", "token", 0.04),
        ("dapo", "token", 0.0),
        ("bnpo", "token", 0.0),
        ("grpo", "sequence", 0.04),
    ):
        seed += 1
        cases.append(
            run_grpo_case(
                env,
                f"adv2d-{loss_type}-{level}-beta{beta}",
                seed,
                loss_type=loss_type,
                importance_sampling_level=level,
                beta=beta,
                adv_2d=True,
            )
        )
    return cases


def grpo_loss_type_cases(env):
    """TRL 1.16.0's newer loss types: cispo, sapo, luspo, vespo
    (trl_grpo_loss_types.json)."""
    cases = []
    seed = 1100

    def case(name, loss_type, opts=None, **kw):
        nonlocal seed
        seed += 1
        if loss_type == "cispo":
            # epsilon_high is CISPO's absolute cap eps_max; 1.28 is met by the drawn
            # ratios
            kw.setdefault("epsilon_high", 1.28)
            kw.setdefault("inputs_epsilon_high", 0.28)
        cases.append(
            run_grpo_case(
                env, name, seed, loss_type=loss_type, loss_type_options=opts or {}, **kw
            )
        )

    for loss_type in ("cispo", "sapo", "luspo", "vespo"):
        for level in ("token", "sequence"):
            for beta, bias in ((0.0, False), (0.04, False), (0.04, True)):
                case(
                    f"{loss_type}-{level}-beta{beta}-bias{int(bias)}",
                    loss_type,
                    importance_sampling_level=level,
                    beta=beta,
                    use_bias_correction_kl=bias,
                )
            # On-policy: old = new.detach(), the gradient flows through new only.
            case(
                f"onpolicy-{loss_type}-{level}-beta0.04-bias1",
                loss_type,
                importance_sampling_level=level,
                beta=0.04,
                use_bias_correction_kl=True,
                on_policy=True,
            )
        # Ratios far from 1 (token log-ratios with standard deviation 2): caps, gates
        # and clamps all act.
        case(f"far-{loss_type}-token-beta0.04", loss_type, beta=0.04, sigma=2.0)
        # (B, T) advantages.
        case(f"adv2d-{loss_type}-token-beta0.04", loss_type, beta=0.04, adv_2d=True)
        # Gradient accumulation, and num_items_in_batch over two micro-batches (dapo's
        # normaliser for cispo/vespo).
        case(
            f"gas2-items2x-{loss_type}-sequence-beta0.04",
            loss_type,
            importance_sampling_level="sequence",
            beta=0.04,
            gradient_accumulation_steps=2,
            num_items_factor=2,
        )
    # CISPO's cap: unset epsilon_high falls back to epsilon (every ratio above 0.2 is
    # cut to 0.2); 5.0 as ScaleRL.
    case(
        "cispo-epshigh_unset-token-beta0.0",
        "cispo",
        epsilon_high=None,
        inputs_epsilon_high=0.28,
    )
    case("cispo-epshigh5-token-beta0.0", "cispo", epsilon_high=5.0, sigma=2.0)
    # SAPO and VESPO with non-default float options (TRL computes them in float32).
    sapo = {"sapo_temperature_pos": 0.7, "sapo_temperature_neg": 1.3}
    vespo = {
        "vespo_k_pos": 1.5,
        "vespo_lambda_pos": 2.5,
        "vespo_k_neg": 2.5,
        "vespo_lambda_neg": 1.7,
    }
    for level in ("token", "sequence"):
        case(
            f"sapo-tau0.7_1.3-{level}-beta0.04",
            "sapo",
            sapo,
            importance_sampling_level=level,
            beta=0.04,
            sigma=1.0,
        )
    case("vespo-k1.5_2.5-lambda2.5_1.7-token-beta0.0", "vespo", vespo, sigma=0.5)
    case(
        "vespo-k1.5_2.5-lambda2.5_1.7-token-beta0.04-bias1",
        "vespo",
        vespo,
        beta=0.04,
        use_bias_correction_kl=True,
        sigma=0.5,
    )
    # VESPO's log w clamps ([log 1e-8, 20], and +-20 per token) and LUSPO with two-sided
    # clipping.
    case("vespo-clamps-token-beta0.0", "vespo", sigma=12.0)
    case(
        "luspo-delta1.5-sequence-beta0.04",
        "luspo",
        importance_sampling_level="sequence",
        beta=0.04,
        delta=1.5,
    )
    return cases


# --------------------------------------------------------------------------------------
# Advantages: GRPOTrainer._generate_and_score_completions
# --------------------------------------------------------------------------------------


def reward_scenarios():
    """(N, K) float32 reward tables; NaN = the reward function returned None for that
    row."""
    rng = np.random.default_rng(20240601)
    out = {}
    # (a) all finite: a 0/1 correctness reward and a continuous format score.
    a = np.stack(
        [
            rng.integers(0, 2, N_ROWS).astype(float),
            np.round(rng.normal(0.0, 1.0, N_ROWS), 3),
        ],
        axis=1,
    )
    out["all_finite"] = a
    # (b) some single entries NaN (one function returned None for some rows).
    b = np.stack(
        [rng.integers(0, 2, N_ROWS).astype(float), rng.uniform(-1.0, 2.0, N_ROWS)],
        axis=1,
    )
    for row, col in ((0, 1), (3, 0), (6, 1), (9, 0), (10, 1), (15, 0)):
        b[row, col] = np.nan
    out["some_nan"] = b
    # (c) fully-NaN rows (unscorable), including a group (rows 4..7) with a single valid
    #     row.
    c = np.stack(
        [rng.uniform(0.0, 1.0, N_ROWS), rng.uniform(-2.0, 2.0, N_ROWS)], axis=1
    )
    c[[1, 4, 5, 7, 13], :] = np.nan
    c[11, 1] = np.nan
    out["nan_rows"] = c
    # (d) group 1 (rows 4..7) has identical rewards (zero std); group 2 (rows 8..11) is
    #     entirely NaN.
    d = np.stack(
        [rng.integers(0, 2, N_ROWS).astype(float), rng.uniform(0.0, 3.0, N_ROWS)],
        axis=1,
    )
    d[4:8, 0], d[4:8, 1] = 1.0, 0.5
    d[8:12, :] = np.nan
    d[14, 0] = np.nan
    out["zero_std_and_nan_group"] = d
    return {k: v.astype(np.float32).astype(np.float64) for k, v in out.items()}


REWARD_TABLE = {}  # the current case's rewards; read by the two reward functions below


def reward_correct(prompts, completions, row, **kwargs):
    return [
        None if math.isnan(REWARD_TABLE["r"][i, 0]) else float(REWARD_TABLE["r"][i, 0])
        for i in row
    ]


def reward_format(prompts, completions, row, **kwargs):
    return [
        None if math.isnan(REWARD_TABLE["r"][i, 1]) else float(REWARD_TABLE["r"][i, 1])
        for i in row
    ]


def run_advantage_case(
    env, name, rewards, *, scale_rewards, aggregation, reward_weights
):
    trainer = env.grpo_trainer(
        [reward_correct, reward_format],
        per_device_train_batch_size=N_ROWS,
        num_generations=G,
        max_completion_length=4,
        beta=0.0,
        scale_rewards=scale_rewards,
        multi_objective_aggregation=aggregation,
        reward_weights=reward_weights,
    )
    completion_ids = [
        [3 + (i % 5)] * (1 + i % 4) + ([1] if i % 3 else []) for i in range(N_ROWS)
    ]

    def fixed_generation(
        prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs
    ):
        assert len(prompt_ids) == N_ROWS and num_generations == G
        return [list(ids) for ids in completion_ids], None

    trainer._generate_single_turn = fixed_generation
    REWARD_TABLE["r"] = rewards
    batch = [{"prompt": f"w{i // G} w{i // G + 1}", "row": i} for i in range(N_ROWS)]
    output = trainer._generate_and_score_completions(batch)
    assert output["advantages"].dtype == torch.float32
    return {
        "name": name,
        "options": {
            "num_generations": G,
            "reward_weights": reward_weights,
            "scale_rewards": scale_rewards,
            "multi_objective_aggregation": aggregation,
        },
        # after GRPOConfig maps True/False to "group"/"none"
        "trl_scale_rewards": trainer.scale_rewards,
        "inputs": {"rewards_per_func": nan_to_null(rewards.tolist())},
        "advantages": floats(output["advantages"]),
        "metrics": {
            m: last_metric(trainer, m)
            for m in ("reward", "reward_std", "frac_reward_zero_std")
        },
    }


def advantage_cases(env):
    cases = []
    weights = {
        "all_finite": [1.0, 0.5],
        "some_nan": None,
        "nan_rows": [1.0, 0.5],
        "zero_std_and_nan_group": [2.0, -0.5],
    }
    for scenario, rewards in reward_scenarios().items():
        for aggregation in AGGREGATIONS:
            for scale in SCALE_REWARDS:
                # vary weights within a scenario too
                w = weights[scenario] if scale != "none" else None
                name = (
                    f"{scenario}-{aggregation}-scale_{scale}-w"
                    f"{'none' if w is None else '_'.join(map(str, w))}"
                )
                cases.append(
                    run_advantage_case(
                        env,
                        name,
                        rewards,
                        scale_rewards=scale,
                        aggregation=aggregation,
                        reward_weights=w,
                    )
                )
    return cases


# --------------------------------------------------------------------------------------
# DPO: DPOTrainer._compute_loss
# --------------------------------------------------------------------------------------


class StubPolicy(torch.nn.Module):
    """Stands in for the fused-LM-head forward: returns chosen per-token log-probs
    (rows: chosen then rejected)."""

    def __init__(self, per_token_logps):
        super().__init__()
        self.per_token_logps = per_token_logps

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        labels=None,
        fused_lm_head=False,
        **kwargs,
    ):
        assert fused_lm_head and labels is not None
        shape = self.per_token_logps.shape
        # log-probs are for the shifted labels
        assert labels.shape == (
            shape[0],
            shape[1] + 1,
        )
        return SimpleNamespace(
            log_probs=self.per_token_logps,
            entropy=torch.ones(shape, dtype=torch.float64),
            mean_logits=torch.zeros(shape, dtype=torch.float64),
            is_top1=torch.zeros(shape, dtype=torch.bool),
        )


def dpo_inputs(seed, beta):
    """Sequence log-probs (all < 0) whose logits beta * (chosen - rejected log-ratio)
    take both signs and fall on both sides of the hinge's kink at 1."""
    for attempt in range(10_000):
        rng = np.random.default_rng([seed, attempt])
        lengths = rng.integers(2, DPO_COMPLETION + 1, size=2 * P_PAIRS)
        comp_mask = np.arange(DPO_COMPLETION)[None, :] < lengths[:, None]
        # multiples of 2**-10 in [-4, -0.05]: their sum is exact in any order
        per_token = np.where(
            comp_mask,
            -np.round(rng.uniform(0.05, 4.0, comp_mask.shape) * 1024) / 1024,
            0.0,
        )
        seq = per_token.sum(axis=1)
        # the logits will be beta * gap
        gap = rng.uniform(-2.0, 3.0, size=P_PAIRS) / beta
        chosen_logratio = gap / 2 + rng.normal(0.0, 1.0, P_PAIRS)
        ref_chosen = np.round(seq[:P_PAIRS] - chosen_logratio, 6)
        ref_rejected = np.round(seq[P_PAIRS:] - (chosen_logratio - gap), 6)
        logits = beta * ((seq[:P_PAIRS] - ref_chosen) - (seq[P_PAIRS:] - ref_rejected))
        if (
            max(ref_chosen.max(), ref_rejected.max()) < 0
            and (logits < 0).any()
            and (logits > 1.05).any()
            and ((logits > 0) & (logits < 0.95)).any()
            and (np.abs(logits - 1) > 1e-3).all()
        ):
            return per_token, comp_mask, ref_chosen, ref_rejected, [seed, attempt]
    raise RuntimeError("no DPO seed found")


def run_dpo_case(
    env,
    name,
    seed,
    *,
    loss_type,
    beta,
    label_smoothing,
    loss_weights=None,
    discopop_tau=None,
):
    """One ``DPOTrainer._compute_loss`` call. ``loss_type``: a name (the original
    fixture file's records) or a list of names (the loss-family file, whose records also
    list loss_weights, discopop_tau and the token counts)."""
    family = not isinstance(loss_type, str)
    extra = {} if discopop_tau is None else {"discopop_tau": discopop_tau}
    trainer = env.dpo_trainer(
        loss_type=list(loss_type) if family else [loss_type],
        beta=beta,
        label_smoothing=label_smoothing,
        loss_weights=loss_weights,
        **extra,
    )
    trainer.precompute_ref_logps = True  # take the reference log-probs from the batch
    per_token, comp_mask, ref_chosen, ref_rejected, used_seed = dpo_inputs(seed, beta)

    # Input rows: DPO_PROMPT prompt tokens then DPO_COMPLETION completion tokens
    # (right-padded). The fused head returns one log-prob per next-token position (width
    # total - 1), zero where the label is -100.
    total = DPO_PROMPT + DPO_COMPLETION
    completion_mask = np.zeros((2 * P_PAIRS, total), dtype=np.int64)
    completion_mask[:, DPO_PROMPT:] = comp_mask
    attention_mask = np.concatenate(
        [np.ones((2 * P_PAIRS, DPO_PROMPT), dtype=np.int64), comp_mask], axis=1
    )
    full = np.zeros((2 * P_PAIRS, total - 1))
    full[:, DPO_PROMPT - 1 :] = per_token
    leaf = torch.tensor(full, dtype=torch.float64, requires_grad=True)
    inputs = {
        "input_ids": torch.full((2 * P_PAIRS, total), 7, dtype=torch.long),
        "attention_mask": torch.tensor(attention_mask),
        "completion_mask": torch.tensor(completion_mask),
        "ref_chosen_logps": torch.tensor(ref_chosen, dtype=torch.float64),
        "ref_rejected_logps": torch.tensor(ref_rejected, dtype=torch.float64),
    }
    loss = trainer._compute_loss(StubPolicy(leaf), inputs, return_outputs=False)
    loss.backward()
    assert loss.dtype == torch.float64
    grad = leaf.grad.numpy()
    # logps = per_token.sum(1), so every token of a sequence receives d loss / d
    # (sequence log-prob); "sft" reads only the valid completion tokens of the chosen
    # rows, which all receive the same -1 / (chosen tokens).
    valid = np.zeros(grad.shape, dtype=bool)
    valid[:, DPO_PROMPT - 1 :] = comp_mask
    # one value per valid row
    assert np.all(grad == np.where(valid, grad[:, DPO_PROMPT - 1 : DPO_PROMPT], grad))
    if not family or "sft" not in loss_type:
        assert np.all(grad == grad[:, :1])
    # a valid completion token of every row (lengths are >= 2)
    grad = grad[:, DPO_PROMPT - 1 : DPO_PROMPT]
    seq = per_token.sum(axis=1)
    metrics = {
        m: last_metric(trainer, m)
        for m in (
            "rewards/chosen",
            "rewards/rejected",
            "rewards/accuracies",
            "rewards/margins",
            "logps/chosen",
            "logps/rejected",
        )
    }
    options = {
        "loss_type": trainer.loss_types[0],
        "beta": trainer.beta,
        "label_smoothing": trainer.label_smoothing,
    }
    inputs = {
        "policy_chosen": floats(seq[:P_PAIRS]),
        "policy_rejected": floats(seq[P_PAIRS:]),
        "ref_chosen": floats(ref_chosen),
        "ref_rejected": floats(ref_rejected),
    }
    if family:
        options.update(
            loss_type=list(trainer.loss_types),
            loss_weights=list(trainer.loss_weights),
            discopop_tau=trainer.args.discopop_tau,
        )
        # completion tokens per sequence (what TRL's completion_mask counts)
        lengths = comp_mask.sum(axis=1)
        inputs.update(
            chosen_lengths=lengths[:P_PAIRS].tolist(),
            rejected_lengths=lengths[P_PAIRS:].tolist(),
        )
    return {
        "name": name,
        "seed": used_seed,
        "options": options,
        "inputs": inputs,
        "loss": float(loss.item()),
        "grad_policy_chosen": floats(grad[:P_PAIRS, 0]),
        "grad_policy_rejected": floats(grad[P_PAIRS:, 0]),
        "metrics": metrics,
    }


def dpo_cases(env):
    cases = []
    seed = 700
    for loss_type in ("sigmoid", "hinge", "robust"):
        for beta in (0.1, 0.5):
            # the same inputs for both label_smoothing values, so their effect is
            # visible
            seed += 1
            for label_smoothing in (0.0, 0.2):
                cases.append(
                    run_dpo_case(
                        env,
                        f"{loss_type}-beta{beta}-ls{label_smoothing}",
                        seed,
                        loss_type=loss_type,
                        beta=beta,
                        label_smoothing=label_smoothing,
                    )
                )
    return cases


def dpo_family_cases(env):
    """Every TRL 1.16.0 DPO loss type, and combinations with loss_weights
    (trl_dpo_loss_family.json)."""
    cases = []
    seed = 1700

    def case(name, loss_type, beta, label_smoothing=0.0, **kw):
        nonlocal seed
        seed += 1
        types = [loss_type] if isinstance(loss_type, str) else list(loss_type)
        cases.append(
            run_dpo_case(
                env,
                name,
                seed,
                loss_type=types,
                beta=beta,
                label_smoothing=label_smoothing,
                **kw,
            )
        )

    for loss_type in (
        "sigmoid",
        "hinge",
        "ipo",
        "nca_pair",
        "bco_pair",
        "sppo_hard",
        "apo_zero",
        "apo_down",
        "discopop",
        "sigmoid_norm",
        "sft",
    ):
        for beta in (0.1, 0.5):
            case(f"{loss_type}-beta{beta}", loss_type, beta)
    for loss_type, values in (
        ("robust", (0.1, 0.3)),
        ("exo_pair", (1e-3, 0.2)),
        ("aot", (0.0, 0.2)),
        ("aot_unpaired", (0.0, 0.2)),
    ):
        for beta in (0.1, 0.5):
            for ls in values:
                case(f"{loss_type}-beta{beta}-ls{ls}", loss_type, beta, ls)
    case("discopop-tau0.2-beta0.1", "discopop", 0.1, discopop_tau=0.2)
    # Combinations (MPO-style weighted sums; unweighted when loss_weights is None).
    case(
        "sigmoid+bco_pair+sft-w0.8_0.2_1.0-beta0.1",
        ["sigmoid", "bco_pair", "sft"],
        0.1,
        loss_weights=[0.8, 0.2, 1.0],
    )
    case("ipo+hinge-beta0.1", ["ipo", "hinge"], 0.1)
    case(
        "robust+aot-w1.0_0.5-beta0.5-ls0.2",
        ["robust", "aot"],
        0.5,
        0.2,
        loss_weights=[1.0, 0.5],
    )
    case(
        "apo_zero+sigmoid_norm+nca_pair-w0.5_1.5_-0.25-beta0.5",
        ["apo_zero", "sigmoid_norm", "nca_pair"],
        0.5,
        loss_weights=[0.5, 1.5, -0.25],
    )
    return cases


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# RLOO: RLOOTrainer._generate_and_score_completions, then RLOOTrainer._compute_loss on
# its output
# --------------------------------------------------------------------------------------

RLOO_B, RLOO_G, RLOO_T = 8, 4, 5


def reward_rloo(prompts, completions, row, **kwargs):
    return [float(REWARD_TABLE["rloo"][i]) for i in row]


def run_rloo_case(
    env, name, seed, *, beta, epsilon_high=None, normalize_advantages=False, sigma=0.1
):
    """One RLOO step of TRL's own code: the real ``_generate_and_score_completions``
    (instance patches: ``_generate_single_turn`` returns fixed completion ids;
    ``_get_per_token_logps_and_entropies`` returns the chosen old log-probs for the
    policy and ref log-probs for ``trainer.ref_model``), then the real ``_compute_loss``
    on that output with the new log-probs as a float64 leaf."""
    rng = np.random.default_rng(seed)
    lengths = rng.permutation(
        np.concatenate([[RLOO_T, 1], rng.integers(1, RLOO_T + 1, size=RLOO_B - 2)])
    )
    old = np.round(np.log(rng.uniform(0.1, 0.9, size=(RLOO_B, RLOO_T))), 6)
    ref = np.round(old - rng.uniform(0.0, 0.3, size=(RLOO_B, RLOO_T)), 6)
    new = np.round(old + rng.normal(0.0, sigma, size=(RLOO_B, RLOO_T)), 6)
    rewards = np.round(rng.uniform(0.0, 1.0, size=RLOO_B), 3)
    rewards[RLOO_G : 2 * RLOO_G] = (rng.uniform(size=RLOO_G) > 0.5).astype(float)
    REWARD_TABLE["rloo"] = rewards
    args = trl.RLOOConfig(
        output_dir=str(env.root / "out"),
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        seed=0,
        per_device_train_batch_size=RLOO_B,
        num_generations=RLOO_G,
        max_completion_length=RLOO_T,
        beta=beta,
        epsilon=EPSILON,
        epsilon_high=epsilon_high,
        normalize_advantages=normalize_advantages,
    )
    trainer = trl.RLOOTrainer(
        model=env.model_path,
        reward_funcs=[reward_rloo],
        args=args,
        train_dataset=env.grpo_dataset,
        processing_class=env.tokenizer,
    )
    trainer.model.train()
    # no EOS in the ids: every listed token is a completion token, the rest padding
    ids = [[3 + (i % 5)] * int(n) for i, n in enumerate(lengths)]
    trainer._generate_single_turn = lambda prompt_ids, images, fields: [
        list(x) for x in ids
    ]
    leaf = torch.tensor(new, dtype=torch.float64, requires_grad=True)
    phase = {"loss": False}

    def fake_logps(model, input_ids, attention_mask, logits_to_keep, *a, **kw):
        assert logits_to_keep == RLOO_T and input_ids.shape[0] == RLOO_B
        if phase["loss"]:
            return leaf, torch.zeros(RLOO_B, RLOO_T, dtype=torch.float64), None
        table = ref if model is trainer.ref_model else old
        return torch.tensor(table, dtype=torch.float64), None, None

    trainer._get_per_token_logps_and_entropies = fake_logps
    batch = [
        {"prompt": f"w{i // RLOO_G} w{i // RLOO_G + 1}", "row": i}
        for i in range(RLOO_B)
    ]
    out = trainer._generate_and_score_completions(batch)
    mask = out["completion_mask"].numpy()
    assert (mask.sum(1) == lengths).all()
    phase["loss"] = True
    loss = trainer._compute_loss(trainer.model, out)
    loss.backward()
    return {
        "name": name,
        "seed": seed,
        "options": {
            "beta": trainer.beta,
            "epsilon": trainer.epsilon_low,
            "epsilon_high": trainer.epsilon_high,
            "num_generations": trainer.num_generations,
            "normalize_advantages": trainer.normalize_advantages,
        },
        "inputs": {
            "new_logps": floats(new),
            "old_logps": floats(old),
            "ref_logps": floats(ref),
            "rewards": floats(rewards),
            "mask": mask.tolist(),
        },
        "old_logps_sum": floats(out["old_logps"]),
        "advantages": floats(out["advantages"]),
        "loss": float(loss.item()),
        "grad_new_logps": floats(leaf.grad),
        "metrics": {
            m: last_metric(trainer, m)
            for m in (
                "clip_ratio/low_mean",
                "clip_ratio/high_mean",
                "clip_ratio/region_mean",
            )
        },
    }


def rloo_cases(env):
    return [
        run_rloo_case(env, "beta0.05-near", 300, beta=0.05),
        run_rloo_case(env, "beta0-near", 301, beta=0.0),
        run_rloo_case(env, "beta0.05-stale", 302, beta=0.05, sigma=0.3),
        run_rloo_case(
            env,
            "beta0.1-normalized-eps_high",
            303,
            beta=0.1,
            epsilon_high=0.28,
            normalize_advantages=True,
            sigma=0.3,
        ),
    ]


def dump(path: Path, produced_by: str, notes: str, cases: list) -> None:
    header = {
        "trl_version": trl.__version__,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "produced_by": produced_by,
        "generated_by": GENERATED_BY,
        "notes": notes,
    }
    lines = ["{"]
    for key, value in header.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    lines.append('  "cases": [')
    body = [f"    {json.dumps(case, allow_nan=False)}" for case in cases]
    lines.append(",\n".join(body))
    lines.append("  ]")
    lines.append("}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


FILES = (
    "trl_grpo_loss.json",
    "trl_advantages.json",
    "trl_dpo_loss.json",
    "trl_grpo_loss_types.json",
    "trl_dpo_loss_family.json",
    "trl_rloo.json",
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("trl_fixtures"),
        help="folder for the trl_*.json files (default: trl_fixtures/ in the working "
        "directory)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=FILES,
        default=list(FILES),
        metavar="FILE",
        help=f"write only these files (default: all of {', '.join(FILES)})",
    )
    args = parser.parse_args(argv)
    if trl.__version__ != EXPECTED_TRL:
        print(
            f"warning: fixtures are pinned to TRL {EXPECTED_TRL}, this is TRL "
            f"{trl.__version__}",
            file=sys.stderr,
        )
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    args.out.mkdir(parents=True, exist_ok=True)
    makers = {
        "trl_grpo_loss.json": grpo_cases,
        "trl_advantages.json": advantage_cases,
        "trl_dpo_loss.json": dpo_cases,
        "trl_grpo_loss_types.json": grpo_loss_type_cases,
        "trl_dpo_loss_family.json": dpo_family_cases,
        "trl_rloo.json": rloo_cases,
    }
    with tempfile.TemporaryDirectory(prefix="trl-fixtures-") as tmp:
        env = Env(Path(tmp))
        cases = {name: makers[name](env) for name in FILES if name in args.only}
    grpo_producer = (
        "GRPOTrainer._compute_loss (real trainer per case; instance patch: "
        "_get_per_token_logps_and_entropies returns the new_logps leaf)"
    )
    dpo_producer = (
        "DPOTrainer._compute_loss (real trainer per case; stub policy forward returns "
        "per-token log-probs; precompute_ref_logps=True with "
        "ref_chosen_logps/ref_rejected_logps in the batch)"
    )
    notes = {
        "trl_grpo_loss.json": (
            grpo_producer,
            "float64 throughout. loss and grad_new_logps (d loss / d new_logps via "
            "autograd) are float64; the clip_ratio/* metrics are float32 in TRL "
            "(bool.float()), kl is float64. old_logps null = on-policy (TRL uses "
            "new_logps.detach()); ref_logps null = beta 0 (TRL does not read it).",
        ),
        "trl_advantages.json": (
            "GRPOTrainer._generate_and_score_completions (real method; instance "
            "patch: _generate_single_turn returns fixed completion ids; rewards from "
            "reward functions returning the table, None for null)",
            "rewards_per_func, advantages and metrics are float32 in TRL. null in "
            "rewards_per_func = the reward function returned None. trl_scale_rewards "
            "is TRL's value after GRPOConfig maps True/False.",
        ),
        "trl_dpo_loss.json": (
            dpo_producer,
            "float64. grad_policy_* = d loss / d sequence log-prob. TRL 1.16.0 "
            "ignores label_smoothing for sigmoid and hinge (only robust, exo_pair, "
            "aot and aot_unpaired read it), so those ls0.2 cases equal ls0.0.",
        ),
        "trl_grpo_loss_types.json": (
            grpo_producer,
            "Loss types cispo, sapo, luspo, vespo. As trl_grpo_loss.json; options "
            "also list the SAPO/VESPO fields as TRL read them (TRL turns them into "
            "float32 tensors). Metrics: clip_ratio/* (luspo), cispo_clip_ratio "
            "(float32), vespo/phi_seq_mean (float64), none for sapo; kl when beta != "
            "0.",
        ),
        "trl_dpo_loss_family.json": (
            dpo_producer,
            "float64. Every DPOConfig.loss_type, and lists combined with loss_weights "
            "(options.loss_type is the list). chosen_lengths/rejected_lengths = "
            "completion tokens per sequence (TRL's completion mask); ipo and "
            "sigmoid_norm divide by them, sft averages the chosen per-token log-probs "
            "over them. exo_pair computes log(eps) and log1p(-eps) in float32.",
        ),
        "trl_rloo.json": (
            "RLOOTrainer._generate_and_score_completions then "
            "RLOOTrainer._compute_loss on its output (real trainer per case; instance "
            "patches: _generate_single_turn returns fixed completion ids, "
            "_get_per_token_logps_and_entropies returns old/ref log-probs while "
            "scoring and the new_logps leaf in the loss; rewards from a reward "
            "function returning the table)",
            "advantages float32 when beta == 0 (float rewards), float64 otherwise (k1 "
            "from float64 log-probs). old_logps_sum = TRL's old_logps (sum over "
            "completion tokens). grad_new_logps = d loss / d new_logps. clip_ratio/* "
            "per sequence.",
        ),
    }
    for name, found in cases.items():
        dump(args.out / name, *notes[name], found)
    print(
        "wrote "
        + ", ".join(f"{len(c)} cases to {n}" for n, c in cases.items())
        + f" in {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
