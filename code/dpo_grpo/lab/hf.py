"""The lab's verifiable addition task on a pretrained instruct model from the Hugging
Face Hub (needs ``transformers``; a GPU for a real model).

``HFLabConfig.preset("qwen2.5-0.5b")`` names ``Qwen/Qwen2.5-0.5B-Instruct``;
:func:`load_pretrained` loads it with ``AutoModelForCausalLM`` / ``AutoTokenizer`` (a
download on first use), and :func:`run_hf_grpo` runs GRPO on the same task as the tiny
lab: prompts ``"27+45="`` sent as a user message through the model's own chat template,
the completion decoded with its own tokenizer up to its end-of-turn token, stripped of
surrounding white space, and scored by the same verifier
(:func:`dpo_grpo.lab.model.verify`). The loss is the book's
(:func:`dpo_grpo.torch_ops.grpo_loss`; ``torch.compile`` on CUDA), the advantages
:func:`dpo_grpo.torch_ops.reward_advantages` (TRL's: sample std, ddof = 1).

Offline (tests, CI), :func:`tiny_random_model` builds a randomly initialised model of
the same architecture (``Qwen2ForCausalLM`` from a ``Qwen2Config``) and a
character-level tokenizer with a ChatML chat template, built locally with
``tokenizers``: no download, same code path.

Expected time per GRPO step of the ``qwen2.5-0.5b`` preset (8 prompts x 8 completions,
up to 8 new tokens, one optimisation epoch, a frozen reference copy) -- *estimates* from
the FLOP count (about 4e13 per step: sampling without a KV cache re-reads the ~45-token
prompt for each new token) and typical sustained throughput, not measurements: about 10
s on a T4 (float32 weights: the T4 has no bfloat16 tensor cores; ~10 GB with AdamW and
the reference), about 1 s on an A100 (bfloat16 weights, latency-bound at this batch
size). ``history["step_time_s"]`` records the real value."""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from dataclasses import dataclass

import torch

from .. import _validation as v
from .. import torch_ops
from .config import GRPOTaskConfig, checked_config
from .grpo import grpo_update, reference_logps
from .model import (
    check_ids_and_mask,
    completion_logps,
    generate,
    text_list,
    verify,
)
from .runtime import as_device, derived_seed
from .task import PromptStream, make_task


#: Expected seconds per GRPO step of the ``qwen2.5-0.5b`` preset: ESTIMATES from the
#: FLOP count and typical sustained throughput (see the module docstring), not
#: measurements.
EXPECTED_STEP_SECONDS = {"T4": 10.0, "A100": 1.0}
#: Parameters of Qwen2.5-0.5B-Instruct (its model card: 0.49B)
QWEN25_05B_PARAMETERS = 494_032_768

#: ChatML, the format of Qwen2.5's chat template (the tiny local tokenizer uses the same
#: markers)
CHATML_TEMPLATE = (
    "{% for m in messages %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@dataclass(frozen=True)
class HFLabConfig(GRPOTaskConfig):
    """Settings of a GRPO run on a Hugging Face causal LM: the task and GRPO fields of
    :class:`dpo_grpo.lab.config.GRPOTaskConfig` (TRL's ``GRPOConfig`` names where one
    exists: ``learning_rate`` is ``grpo_lr`` here, ``per_device_train_batch_size`` is
    ``prompts_per_step * num_generations``), with defaults for a 0.5B model, and the
    model's own fields."""

    # the base's fields, other defaults
    n_terms: int = 2
    n_digits: int = 2
    n_heldout: int = 400
    max_completion_length: int = 8
    grpo_steps: int = 200
    grpo_lr: float = 1e-6
    prompts_per_step: int = 8
    num_iterations: int = 1
    eval_every: int = 20
    # the model's
    model_name: str = "Qwen/Qwen2.5-0.5B-Instruct"
    system_prompt: str = (
        "Add the numbers. Reply with the sum only: digits, nothing else."
    )
    eval_prompts: int = 200  # held-out prompts scored greedily at each evaluation
    # None: bfloat16 on a GPU with bfloat16 support, else float32
    dtype: str | None = None

    _PRESETS = ("qwen2.5-0.5b", "tiny-random")

    @classmethod
    def preset(cls, name: str, **overrides) -> "HFLabConfig":
        """``"qwen2.5-0.5b"``: the real model for a GPU runtime; ``"tiny-random"``: the
        same task and code path on :func:`tiny_random_model`, a few steps, for CPU
        tests."""
        if name == "qwen2.5-0.5b":
            cfg = cls()
        elif name == "tiny-random":
            cfg = cls(
                model_name="tiny-random-qwen2",
                grpo_steps=2,
                grpo_lr=1e-3,
                prompts_per_step=2,
                num_generations=4,
                num_iterations=2,
                eval_every=2,
                eval_prompts=8,
                n_heldout=40,
            )
        else:
            raise ValueError(f"preset name must be one of {cls._PRESETS}, got {name!r}")
        return dataclasses.replace(cfg, **overrides) if overrides else cfg

    def check_fields(self):
        super().check_fields()
        v.integer(self.eval_prompts, "HFLabConfig.eval_prompts", minimum=1)
        v.choice(
            self.dtype, "HFLabConfig.dtype", (None, "float32", "bfloat16", "float16")
        )
        if not isinstance(self.model_name, str) or not self.model_name:
            raise self.field_error("model_name", "must be a non-empty string")


# --- Models and tokenizers ------------------------------------------------------------


def _torch_dtype(cfg: HFLabConfig, device: torch.device) -> torch.dtype:
    if cfg.dtype is not None:
        return getattr(torch, cfg.dtype)
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def load_pretrained(cfg: HFLabConfig, device=None):
    """``(model, tokenizer)`` of ``cfg.model_name`` from the Hub (or the local cache),
    on ``device``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = as_device(device) if device is not None else torch_ops.default_device()
    tokenizer = AutoTokenizer.from_pretrained(cfg.model_name, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(
        cfg.model_name, dtype=_torch_dtype(cfg, device)
    ).to(device)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def char_tokenizer():
    """A character-level ``PreTrainedTokenizerFast`` built locally: the ChatML special
    tokens, then one token per printable ASCII character and newline; its chat template
    is ChatML (the format Qwen2.5 uses)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [chr(i) for i in range(32, 127)] + ["\n"]
    vocab = {t: i for i, t in enumerate(["<unk>", *SPECIAL_TOKENS, *chars])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        padding_side="left",
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def tiny_random_model(
    seed: int = 0, *, hidden_size: int = 32, num_hidden_layers: int = 2
):
    """``(model, tokenizer)``: a randomly initialised ``Qwen2ForCausalLM`` (Qwen2.5's
    architecture: RMSNorm, rotary positions, grouped-query attention, SwiGLU, tied
    embeddings) sized for a CPU test, with :func:`char_tokenizer`. Built from a config:
    nothing is downloaded."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    seed = v.integer(seed, "seed", minimum=0)
    v.integer(num_hidden_layers, "num_hidden_layers", minimum=1)
    if v.integer(hidden_size, "hidden_size", minimum=8) % 8:
        raise ValueError(
            "hidden_size must be a multiple of 8 (4 heads of even width), "
            f"got {hidden_size}"
        )
    tokenizer = char_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    return model.eval(), tokenizer


# --- Prompts, sampling, log-probs -----------------------------------------------------


def encode_chat_prompts(tokenizer, prompts, cfg: HFLabConfig, device=None):
    """Left-padded ``(ids, mask)`` of each prompt as a chat: system message, the sum as
    the user message, and the generation prompt that opens the assistant's turn (the
    model's own chat template)."""
    checked_config(cfg, HFLabConfig)
    prompts = text_list(prompts, "prompts")
    texts = [
        tokenizer.apply_chat_template(
            [
                {"role": "system", "content": cfg.system_prompt},
                {"role": "user", "content": p},
            ],
            tokenize=False,
            add_generation_prompt=True,
        )
        for p in prompts
    ]
    enc = tokenizer(
        texts,
        padding=True,
        padding_side="left",
        add_special_tokens=False,
        return_tensors="pt",
    )
    return enc["input_ids"].to(device), enc["attention_mask"].bool().to(device)


def _logits(model, ids, mask):
    """Logits with positions counted over real tokens only (left padding does not shift
    the rotary positions)."""
    pos = (mask.long().cumsum(1) - 1).clamp(min=0)
    return model(
        input_ids=ids, attention_mask=mask.long(), position_ids=pos, use_cache=False
    ).logits


@torch.no_grad()
def hf_generate(
    model,
    prompt_ids,
    prompt_mask,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    *,
    temperature: float = 1.0,
    greedy: bool = False,
    generator=None,
):
    """Sample up to ``max_new_tokens`` per prompt (or decode greedily), recording each
    sampled token's log-prob under the tempered distribution: ``(completion_ids,
    completion_mask, logps, finished)``, as the tiny lab's sampler returns. No KV cache:
    each new token re-runs the prefix (simple; a serving engine such as vLLM caches)."""
    out = generate(
        model,
        prompt_ids,
        prompt_mask,
        max_new_tokens,
        temperature=temperature,
        greedy=greedy,
        generator=generator,
        eos_id=eos_id,
        pad_id=pad_id,
        logits_fn=_logits,
    )
    return out.completion_ids, out.completion_mask, out.logps, out.finished


def hf_logps(
    model,
    prompt_ids,
    prompt_mask,
    completion_ids,
    completion_mask,
    temperature: float = 1.0,
):
    """Per-token log-probs ``(B, L)`` of the completion tokens, one forward pass,
    tempered as TRL does."""
    return completion_logps(
        model,
        prompt_ids,
        prompt_mask,
        completion_ids,
        completion_mask,
        temperature=temperature,
        log_softmax_fn=torch_ops.selective_log_softmax,
        logits_fn=_logits,
    )


def decode_completions(tokenizer, completion_ids, completion_mask) -> list:
    """Each completion's text up to its end-of-turn token, stripped of surrounding white
    space."""
    check_ids_and_mask(completion_ids, completion_mask, "completion")
    out = []
    for row, m in zip(completion_ids.tolist(), completion_mask.tolist()):
        toks = [t for t, keep in zip(row, m) if keep and t != tokenizer.eos_token_id]
        out.append(tokenizer.decode(toks, skip_special_tokens=True).strip())
    return out


def hf_score(prompts, texts, finished) -> torch.Tensor:
    """``(N, 1)`` correctness: the completion ended its turn and is exactly the sum (the
    lab's verifier)."""
    prompts, texts, finished = (
        text_list(prompts, "prompts"),
        text_list(texts, "texts"),
        list(v.sequence(finished, "finished")),
    )
    if not len(prompts) == len(texts) == len(finished):
        raise ValueError(
            "prompts, texts and finished must have the same length, got "
            f"{len(prompts)}, {len(texts)}, "
            f"{len(finished)}"
        )
    return torch.tensor(
        [
            [1.0 if (done and verify(p, t)) else 0.0]
            for p, t, done in zip(prompts, texts, finished)
        ]
    )


# --- The run --------------------------------------------------------------------------


@torch.no_grad()
def hf_pass_rate(
    model, tokenizer, prompts, cfg: HFLabConfig, device, batch_size: int = 64
) -> float:
    """Greedy pass rate of ``prompts`` (the held-out measure of the tiny lab)."""
    checked_config(cfg, HFLabConfig)
    prompts = text_list(prompts, "prompts")
    batch_size = v.integer(batch_size, "batch_size", minimum=1)
    device = as_device(device)
    hits = 0
    for i in range(0, len(prompts), batch_size):
        chunk = prompts[i : i + batch_size]
        pids, pmask = encode_chat_prompts(tokenizer, chunk, cfg, device)
        cids, cmask, _, done = hf_generate(
            model,
            pids,
            pmask,
            cfg.max_completion_length,
            tokenizer.eos_token_id,
            tokenizer.pad_token_id,
            greedy=True,
        )
        hits += int(
            hf_score(
                chunk, decode_completions(tokenizer, cids, cmask), done.tolist()
            ).sum()
        )
    return hits / len(prompts)


def run_hf_grpo(
    cfg: HFLabConfig,
    model,
    tokenizer,
    seed: int = 0,
    *,
    device=None,
    compile: bool | None = None,
    reward_fn=None,
    log=None,
) -> dict:
    """GRPO on the addition task with a Hugging Face causal LM (trained in place; a
    frozen copy is the reference).

    Returns a history dict of lists: per step ``loss``, ``reward_mean``,
    ``frac_reward_zero_std``, ``kl``, ``clip_ratio_region``, ``completion_length``,
    ``grad_norm``, ``step_time_s``; per evaluation ``eval_step`` and
    ``heldout_pass_rate`` (greedy, on the first ``eval_prompts`` held-out prompts);
    ``kl`` is 0 when ``beta == 0``. The update is the tiny lab's
    (:func:`dpo_grpo.lab.grpo.grpo_update`) with :func:`hf_logps`. ``compile`` (default:
    on CUDA) passes ``compile=True`` to the book's GRPO loss. ``reward_fn(prompts,
    texts, finished) -> (N, 1)`` replaces the verifier (:func:`hf_score`, the default).
    """
    checked_config(cfg, HFLabConfig)
    seed = v.integer(seed, "seed", minimum=0)
    if reward_fn is not None and not callable(reward_fn):
        raise TypeError(
            f"reward_fn must be callable or None, got {type(reward_fn).__name__}"
        )
    device = (
        as_device(device) if device is not None else next(model.parameters()).device
    )
    compile = (
        device.type == "cuda" if compile is None else v.boolean(compile, "compile")
    )
    model.to(device)
    task = make_task(cfg)
    heldout = task.heldout_prompts()[: cfg.eval_prompts]
    stream = PromptStream(task.train_prompts(), derived_seed(seed, "data"))
    gen = torch.Generator(device=device).manual_seed(derived_seed(seed, "sampling"))
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.grpo_lr, weight_decay=0.0)
    g = cfg.num_generations
    hist = {
        k: []
        for k in (
            "step",
            "loss",
            "reward_mean",
            "frac_reward_zero_std",
            "kl",
            "clip_ratio_region",
            "completion_length",
            "grad_norm",
            "step_time_s",
            "eval_step",
            "heldout_pass_rate",
        )
    }

    def evaluate(step):
        model.eval()
        hist["eval_step"].append(step)
        hist["heldout_pass_rate"].append(
            hf_pass_rate(model, tokenizer, heldout, cfg, device)
        )

    evaluate(0)
    for step in range(1, cfg.grpo_steps + 1):
        t0 = time.perf_counter()
        model.eval()  # sampling and training without dropout
        prompts = stream.next(cfg.prompts_per_step)
        rep = [p for p in prompts for _ in range(g)]
        pids, pmask = encode_chat_prompts(tokenizer, rep, cfg, device)
        cids, cmask, old, done = hf_generate(
            model,
            pids,
            pmask,
            cfg.max_completion_length,
            tokenizer.eos_token_id,
            tokenizer.pad_token_id,
            temperature=cfg.temperature,
            generator=gen,
        )
        texts = decode_completions(tokenizer, cids, cmask)
        adv, _, rm = torch_ops.reward_advantages(
            (reward_fn or hf_score)(rep, texts, done.tolist()).to(device),
            g,
            scale_rewards=cfg.scale_rewards,
        )
        # the update: the tiny lab's (dpo_grpo.lab.grpo), with this model's log-probs
        ref_logps = reference_logps(ref, hf_logps, pids, pmask, cids, cmask, cfg)
        upd = grpo_update(
            model,
            opt,
            hf_logps,
            pids,
            pmask,
            cids,
            cmask,
            old,
            ref_logps,
            adv,
            cfg,
            compile=compile,
        )
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        hist["step"].append(step)
        hist["loss"].append(upd["loss"])
        hist["kl"].append(upd["kl"] if cfg.beta else 0.0)
        hist["clip_ratio_region"].append(upd["clip_ratio_region"])
        hist["grad_norm"].append(upd["grad_norm"])
        hist["reward_mean"].append(float(rm["reward"]))
        hist["frac_reward_zero_std"].append(float(rm["frac_reward_zero_std"]))
        hist["completion_length"].append(float(cmask.float().sum(1).mean()))
        hist["step_time_s"].append(time.perf_counter() - t0)
        if step % cfg.eval_every == 0 or step == cfg.grpo_steps:
            evaluate(step)
        if log is not None:
            log(
                f"step {step}: reward {hist['reward_mean'][-1]:.3f}, "
                f"kl {hist['kl'][-1]:.4f}, "
                f"{hist['step_time_s'][-1]:.2f} s"
            )
    if not all(math.isfinite(x) for x in hist["loss"]):
        raise FloatingPointError(
            "the GRPO loss became non-finite; lower grpo_lr or use float32 (cfg.dtype)"
        )
    hist["texts_last_step"] = list(zip(rep, texts))[: 2 * g]
    return hist
