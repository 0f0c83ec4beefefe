"""The lab's PPO (:mod:`dpo_grpo.lab.ppo`) by the names of verl, an engine that runs
PPO with a critic at scale (TRL 1.16 has no PPO trainer).

verl (``volcengine/verl``) is configured by Hydra overrides of its
``verl/trainer/config/ppo_trainer.yaml`` (``python3 -m verl.trainer.main_ppo
key=value ...``). :data:`PPO_TO_VERL` maps every setting the lab's PPO reads to the
keys that carry it there, :func:`verl_overrides` gives the values for a
:class:`~dpo_grpo.lab.config.LabConfig` and :data:`VERL_DEFAULTS` holds verl's own
default of each key it sets, as read at :data:`VERL_COMMIT`; :func:`mapping_text` is
the mapping as a printed table, in the reader's language. :func:`run_overrides`
completes the overrides into a run (paths, GPUs, micro-batch sizes) that passes
:func:`start_up_check`, verl's start-up checks at :data:`VERL_COMMIT`, re-implemented
on verl's recorded defaults; :func:`verl_command` prints it. ``critic=False`` writes
the lab's GRPO run instead: ``algorithm.adv_estimator=grpo``, for which verl starts no
critic worker (``critic.enable`` is null: verl builds a critic only for ``gae``).
"""

from __future__ import annotations

import json
from importlib import resources

from ..i18n import N_, tr
from .config import LabConfig, checked_config

#: the verl version and commit whose config the keys and defaults were read from
VERL_VERSION = "0.8.0.dev"
VERL_COMMIT = "b178a3cd56f58b2d502255daba591e92833930a7"

_A = "actor_rollout_ref.actor."
_R = "actor_rollout_ref.rollout."

#: (lab setting, verl keys, how the lab's value maps) for PPO with a critic; a setting
#: in parentheses is a behaviour of the lab's PPO that has no field of its own (words,
#: marked for the catalog like the "how" texts; :func:`mapping_text` translates them)
PPO_TO_VERL = (
    (
        N_("(critic)"),
        ("algorithm.adv_estimator",),
        N_("'gae': verl builds a critic worker"),
    ),
    (
        N_("(critic from the SFT model)"),
        ("critic.model.path",),
        N_(
            "the SFT checkpoint, as actor_rollout_ref.model.path; verl adds the scalar "
            "value head (a token-classification model with one label)"
        ),
    ),
    (
        "grpo_steps",
        ("trainer.total_training_steps",),
        N_("same value (one rollout each)"),
    ),
    ("grpo_lr", (_A + "optim.lr",), N_("same value")),
    ("critic_lr", ("critic.optim.lr",), N_("same value (None: grpo_lr)")),
    (
        "prompts_per_step, num_generations",
        ("data.train_batch_size", _R + "n"),
        N_("prompts_per_step x num_generations prompts, n=1: one completion each"),
    ),
    (
        "num_iterations",
        (
            _A + "ppo_epochs",
            "critic.ppo_epochs",
            _A + "ppo_mini_batch_size",
            "critic.ppo_mini_batch_size",
        ),
        N_(
            "epochs = num_iterations; mini-batch = the whole batch (one optimiser step "
            "of each model per epoch)"
        ),
    ),
    (
        "epsilon",
        (_A + "clip_ratio", _A + "clip_ratio_low"),
        N_(
            "same value in both (verl's yaml sets clip_ratio_low and clip_ratio_high, "
            "which override clip_ratio)"
        ),
    ),
    ("epsilon_high", (_A + "clip_ratio_high",), N_("same value (None: epsilon)")),
    (
        "delta",
        (_A + "clip_ratio_c",),
        N_(
            "same value (dual clip: for A < 0 the same bound as TRL's delta when "
            "delta >= 1 + epsilon_high); None: 1e9, a bound that never acts "
            "(verl always applies one, default 3.0)"
        ),
    ),
    (
        "beta",
        (
            "algorithm.use_kl_in_reward",
            "algorithm.kl_penalty",
            "algorithm.kl_ctrl.type",
            "algorithm.kl_ctrl.kl_coef",
            _A + "use_kl_loss",
        ),
        N_(
            "the KL in the reward: use_kl_in_reward (beta > 0), kl_penalty 'kl' (k1), "
            "a fixed controller with kl_coef=beta; no KL loss"
        ),
    ),
    ("gae_lambda", ("algorithm.lam",), N_("same value (verl's default is 1.0)")),
    ("gamma", ("algorithm.gamma",), N_("same value")),
    ("cliprange_value", ("critic.cliprange_value",), N_("same value (default 0.5)")),
    (
        "vf_coef",
        ("critic.grad_clip", "critic.optim.clip_grad"),
        N_(
            "no loss weight in verl (the critic has its own optimiser): clipping the "
            "unweighted gradient at max_grad_norm / vf_coef is the lab's clipping of "
            "the weighted one, and AdamW's step does not see the weight (up to its eps)"
        ),
    ),
    (
        N_("(advantage whitening)"),
        ("algorithm.adv_estimator",),
        N_(
            "built in: verl's gae estimator whitens the advantages over the batch's "
            "tokens (core_algos.compute_gae_advantage_return)"
        ),
    ),
    (
        N_("(token-mean losses)"),
        (_A + "loss_agg_mode", "critic.loss_agg_mode"),
        N_("'token-mean' (the lab's policy loss is loss_type 'bnpo')"),
    ),
    (
        "temperature",
        (_R + "temperature", _R + "top_p", _R + "top_k"),
        N_("same value; top_p=1, top_k=-1: plain sampling"),
    ),
    ("max_completion_length", ("data.max_response_length",), N_("same value")),
    (
        "max_grad_norm",
        (_A + "grad_clip", _A + "optim.clip_grad"),
        N_("same value (the FSDP worker reads grad_clip, the newer engine clip_grad)"),
    ),
    (
        "weight_decay",
        (_A + "optim.weight_decay", "critic.optim.weight_decay"),
        N_("same value (verl's default is 0.01)"),
    ),
    (
        "warmup_steps",
        (
            _A + "optim.lr_warmup_steps",
            "critic.optim.lr_warmup_steps",
            _A + "optim.lr_scheduler_type",
            "critic.optim.lr_scheduler_type",
        ),
        N_(
            "same value: verl's schedulers step once per training step, as the lab's; "
            "'constant' (with warm-up)"
        ),
    ),
    (
        "critic_warmup",
        ("trainer.critic_warmup",),
        N_(
            "the lab's value + 1 (0 stays 0): verl updates the actor from the step "
            "whose number, counted from 1, reaches critic_warmup"
        ),
    ),
    (
        "ref_sync_steps, ref_mixup_alpha",
        (),
        N_("None only: verl's reference model stays frozen"),
    ),
    (
        "reward, length_bonus",
        ("custom_reward_function.path", "custom_reward_function.name"),
        N_(
            "the verifier as a compute_score function in a file of your own; the "
            "score is the reward of the completion's last token"
        ),
    ),
)

#: (lab setting, verl keys, how) of the lab's GRPO in verl, where it differs from
#: :data:`PPO_TO_VERL` (``critic=False``)
GRPO_TO_VERL = (
    (
        "(no critic)",
        ("algorithm.adv_estimator",),
        "'grpo': verl starts no critic worker",
    ),
    (
        "prompts_per_step, num_generations",
        ("data.train_batch_size", _R + "n"),
        "prompts_per_step prompts, n=num_generations completions each",
    ),
    (
        "num_iterations",
        (_A + "ppo_epochs", _A + "ppo_mini_batch_size"),
        "epochs = num_iterations; mini-batch = prompts_per_step (the whole batch)",
    ),
    (
        "beta",
        (
            _A + "use_kl_loss",
            _A + "kl_loss_coef",
            _A + "kl_loss_type",
            "algorithm.use_kl_in_reward",
        ),
        (
            "the KL in the loss: use_kl_loss, kl_loss_coef=beta, 'low_var_kl' (k3); "
            "none in the reward"
        ),
    ),
    (
        "scale_rewards",
        ("algorithm.norm_adv_by_std_in_grpo",),
        "'group': True, 'none': False ('batch' has no verl counterpart)",
    ),
    (
        "loss_type",
        (_A + "loss_agg_mode",),
        "'grpo': 'seq-mean-token-mean', 'bnpo': 'token-mean'",
    ),
)

#: verl's default of every key :func:`verl_overrides` sets, at :data:`VERL_COMMIT`
#: (``verl/trainer/config/_generated_ppo_trainer.yaml``; None: null, "???": required)
VERL_DEFAULTS = {
    "algorithm.adv_estimator": "gae",
    "algorithm.gamma": 1.0,
    "algorithm.lam": 1.0,
    "algorithm.use_kl_in_reward": False,
    "algorithm.kl_penalty": "kl",
    "algorithm.kl_ctrl.type": "fixed",
    "algorithm.kl_ctrl.kl_coef": 0.001,
    "algorithm.norm_adv_by_std_in_grpo": True,
    "data.train_batch_size": 1024,
    "data.max_response_length": 512,
    _R + "n": 1,
    _R + "temperature": 1.0,
    _R + "top_p": 1,
    _R + "top_k": -1,
    _A + "optim.lr": 1e-06,
    _A + "optim.weight_decay": 0.01,
    _A + "optim.lr_warmup_steps": -1,
    _A + "optim.lr_scheduler_type": "constant",
    _A + "optim.clip_grad": 1.0,
    _A + "grad_clip": 1.0,
    _A + "ppo_epochs": 1,
    _A + "ppo_mini_batch_size": 256,
    _A + "clip_ratio": 0.2,
    _A + "clip_ratio_low": 0.2,
    _A + "clip_ratio_high": 0.2,
    _A + "clip_ratio_c": 3.0,
    _A + "loss_agg_mode": "token-mean",
    _A + "use_kl_loss": False,
    _A + "kl_loss_coef": 0.001,
    _A + "kl_loss_type": "low_var_kl",
    "critic.optim.lr": 1e-05,
    "critic.optim.weight_decay": 0.01,
    "critic.optim.lr_warmup_steps": -1,
    "critic.optim.lr_scheduler_type": "constant",
    "critic.optim.clip_grad": 1.0,
    "critic.grad_clip": 1.0,
    "critic.ppo_epochs": "${oc.select:actor_rollout_ref.actor.ppo_epochs,1}",
    "critic.ppo_mini_batch_size": (
        "${oc.select:actor_rollout_ref.actor.ppo_mini_batch_size,256}"
    ),
    "critic.cliprange_value": 0.5,
    "critic.loss_agg_mode": "${oc.select:actor_rollout_ref.actor.loss_agg_mode,"
    "token-mean}",
    "trainer.total_training_steps": None,
    "trainer.critic_warmup": 0,
}
#: keys :data:`PPO_TO_VERL` names without a value of the lab's (paths of your own;
#: :data:`PLACEHOLDERS` writes each into the command)
VERL_PATH_KEYS = (
    "critic.model.path",
    "custom_reward_function.path",
    "custom_reward_function.name",
)
#: ``clip_ratio_c`` for the lab's ``delta=None``: a dual-clip bound that never acts
NO_DUAL_CLIP = 1e9

_LOSS_AGG = {"grpo": "seq-mean-token-mean", "bnpo": "token-mean"}


def _unsupported(cfg: LabConfig, critic: bool):
    if cfg.ref_sync_steps is not None:
        raise ValueError(
            "cfg.ref_sync_steps must be None: verl's reference model stays frozen"
        )
    if not critic:
        if cfg.scale_rewards not in ("group", "none"):
            raise ValueError(
                "cfg.scale_rewards must be 'group' or 'none' for verl's grpo, "
                f"got {cfg.scale_rewards!r}"
            )
        if cfg.loss_type not in _LOSS_AGG:
            raise ValueError(
                f"cfg.loss_type must be one of {tuple(_LOSS_AGG)} for verl, "
                f"got {cfg.loss_type!r}"
            )
        if cfg.importance_sampling_level != "token" or cfg.use_bias_correction_kl:
            raise ValueError(
                "cfg.importance_sampling_level must be 'token' and "
                "cfg.use_bias_correction_kl False for verl's vanilla policy loss"
            )


def verl_overrides(cfg: LabConfig, critic: bool = True) -> dict:
    """``{verl key: value}``: the Hydra overrides of ``verl.trainer.main_ppo`` that
    run the lab's PPO (``critic=True``: GAE, a critic, the KL in the reward) or the
    lab's GRPO (``critic=False``: ``adv_estimator=grpo``, no critic, the KL in the
    loss) with ``cfg``'s settings (see :data:`PPO_TO_VERL` and :data:`GRPO_TO_VERL`).
    verl refuses these alone: :func:`run_overrides` adds the paths, the GPUs and the
    micro-batch sizes. Raises ValueError for a setting verl cannot express (a
    reference that syncs, a batch-scaled reward)."""
    checked_config(cfg)
    if not isinstance(critic, bool):
        raise TypeError(f"critic must be a bool, got {type(critic).__name__}")
    _unsupported(cfg, critic)
    eps_high = cfg.epsilon if cfg.epsilon_high is None else cfg.epsilon_high
    out = {
        "algorithm.adv_estimator": "gae" if critic else "grpo",
        "trainer.total_training_steps": cfg.grpo_steps,
        "data.max_response_length": cfg.max_completion_length,
        _R + "temperature": cfg.temperature,
        _R + "top_p": 1.0,
        _R + "top_k": -1,
        _A + "optim.lr": cfg.grpo_lr,
        _A + "optim.weight_decay": cfg.weight_decay,
        _A + "optim.lr_warmup_steps": cfg.warmup_steps,
        _A + "optim.lr_scheduler_type": "constant",
        _A + "optim.clip_grad": cfg.max_grad_norm,
        _A + "grad_clip": cfg.max_grad_norm,
        _A + "ppo_epochs": cfg.num_iterations,
        _A + "clip_ratio": cfg.epsilon,
        _A + "clip_ratio_low": cfg.epsilon,
        _A + "clip_ratio_high": eps_high,
        _A + "clip_ratio_c": NO_DUAL_CLIP if cfg.delta is None else cfg.delta,
    }
    if not critic:
        return out | {
            "data.train_batch_size": cfg.prompts_per_step,
            _R + "n": cfg.num_generations,
            _A + "ppo_mini_batch_size": cfg.prompts_per_step,
            _A + "loss_agg_mode": _LOSS_AGG[cfg.loss_type],
            _A + "use_kl_loss": cfg.beta > 0,
            _A + "kl_loss_coef": cfg.beta,
            _A + "kl_loss_type": "low_var_kl",
            "algorithm.use_kl_in_reward": False,
            "algorithm.norm_adv_by_std_in_grpo": cfg.scale_rewards == "group",
        }
    n = cfg.prompts_per_step * cfg.num_generations
    critic_lr = cfg.grpo_lr if cfg.critic_lr is None else cfg.critic_lr
    return out | {
        "data.train_batch_size": n,
        _R + "n": 1,
        _A + "ppo_mini_batch_size": n,
        _A + "loss_agg_mode": "token-mean",
        _A + "use_kl_loss": False,
        "algorithm.use_kl_in_reward": cfg.beta > 0,
        "algorithm.kl_penalty": "kl",
        "algorithm.kl_ctrl.type": "fixed",
        "algorithm.kl_ctrl.kl_coef": cfg.beta,
        "algorithm.gamma": cfg.gamma,
        "algorithm.lam": cfg.gae_lambda,
        "critic.optim.lr": critic_lr,
        "critic.optim.weight_decay": cfg.weight_decay,
        "critic.optim.lr_warmup_steps": cfg.warmup_steps,
        "critic.optim.lr_scheduler_type": "constant",
        "critic.optim.clip_grad": cfg.max_grad_norm / cfg.vf_coef,
        "critic.grad_clip": cfg.max_grad_norm / cfg.vf_coef,
        "critic.ppo_epochs": cfg.num_iterations,
        "critic.ppo_mini_batch_size": n,
        "critic.cliprange_value": cfg.cliprange_value,
        "critic.loss_agg_mode": "token-mean",
        "trainer.critic_warmup": cfg.critic_warmup + 1 if cfg.critic_warmup else 0,
    }


def run_overrides(
    overrides: dict,
    n_gpus_per_node: int = 8,
    nnodes: int = 1,
    micro_batch_size_per_gpu: int = 4,
) -> dict:
    """``overrides`` (:func:`verl_overrides`) completed into a run verl starts: the
    paths of your own as shell placeholders (:data:`PLACEHOLDERS`), the GPUs
    (``trainer.n_gpus_per_node`` x ``trainer.nnodes``), vLLM as the rollout engine
    (``rollout.name`` is required), ``micro_batch_size_per_gpu`` sequences per forward
    pass for the actor's update, the rollout's and the reference's log-probs and the
    critic (verl refuses a run without them unless ``use_dynamic_bsz``; they split the
    batch, they do not change the step), and the console as the only logger (verl's
    default adds wandb, which needs a login). Raises ValueError where
    :func:`start_up_check` finds that verl would refuse the result."""
    _check_dict(overrides)
    for name, x in (
        ("n_gpus_per_node", n_gpus_per_node),
        ("nnodes", nnodes),
        ("micro_batch_size_per_gpu", micro_batch_size_per_gpu),
    ):
        if isinstance(x, bool) or not isinstance(x, int) or x < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {x!r}")
    mbs = micro_batch_size_per_gpu
    critic = overrides.get("algorithm.adv_estimator", "gae") == "gae"
    out = {
        k: x for k, x in PLACEHOLDERS.items() if critic or not k.startswith("critic.")
    }
    out |= {
        "trainer.n_gpus_per_node": n_gpus_per_node,
        "trainer.nnodes": nnodes,
        "trainer.logger": ["console"],
        _R + "name": "vllm",
        _A + "ppo_micro_batch_size_per_gpu": mbs,
        _R + "log_prob_micro_batch_size_per_gpu": mbs,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": mbs,
    }
    if critic:
        out["critic.ppo_micro_batch_size_per_gpu"] = mbs
    out |= overrides
    start_up_check(out)
    return out


#: the paths :func:`run_overrides` leaves to you, as shell variables to set before
#: the command: ``MODEL`` (the SFT checkpoint, for the actor, the reference and the
#: critic), ``DATA`` (a folder with the prompts as ``train.parquet`` and
#: ``test.parquet``), ``REWARD`` (a Python file whose ``compute_score`` is the verifier)
PLACEHOLDERS = {
    "actor_rollout_ref.model.path": "$MODEL",
    "critic.model.path": "$MODEL",
    "data.train_files": "$DATA/train.parquet",
    "data.val_files": "$DATA/test.parquet",
    "custom_reward_function.path": "$REWARD",
    "custom_reward_function.name": "compute_score",
}


def _check_dict(overrides):
    if not isinstance(overrides, dict) or not all(
        isinstance(k, str) for k in overrides
    ):
        raise TypeError("overrides must be a dict with string keys (verl_overrides)")


def verl_command(overrides: dict, check: bool = True) -> str:
    """The ``python3 -m verl.trainer.main_ppo`` command line of ``overrides`` (one
    ``key=value`` per line; booleans as ``true``/``false``, None as ``null``, a list
    as a quoted JSON list). With ``check`` (the default), :func:`start_up_check` first:
    ValueError for a command verl would refuse at start-up (complete
    :func:`verl_overrides` with :func:`run_overrides`)."""
    _check_dict(overrides)
    if check:
        start_up_check(overrides)

    def text(x):
        if isinstance(x, bool):
            return "true" if x else "false"
        if isinstance(x, list):
            return "'" + json.dumps(x) + "'"
        return "null" if x is None else str(x)

    lines = [f"    {k}={text(x)}" for k, x in overrides.items()]
    return " \\\n".join(["python3 -m verl.trainer.main_ppo", *lines])


def mapping_text(overrides: dict) -> str:
    """:data:`PPO_TO_VERL` as the TRL page prints it: the verl version and commit, then
    each lab setting with how it maps, and under it each of its verl keys with the
    value ``overrides`` gives it (:func:`verl_overrides`) and verl's default, or a note
    that the key is a path of your own. Words go through :func:`~dpo_grpo.i18n.tr`;
    setting names, keys and values stay as they are."""
    _check_dict(overrides)
    lines = [
        tr(
            "verl {version}, commit {commit}",
            version=VERL_VERSION,
            commit=VERL_COMMIT[:10],
        )
    ]
    for ours, keys, how in PPO_TO_VERL:
        lines.append(f"{tr(ours) if ours.startswith('(') else ours}: {tr(how)}")
        for key in keys:
            if key in overrides:
                lines.append(
                    "    "
                    + tr(
                        "{key} = {value}  (verl's default: {default})",
                        key=key,
                        value=overrides[key],
                        default=VERL_DEFAULTS[key],
                    )
                )
            else:
                lines.append("    " + tr("{key}  (a path of your own)", key=key))
    return "\n".join(lines)


def verl_defaults() -> dict:
    """``{key: default}`` of every key of verl's PPO trainer config at
    :data:`VERL_COMMIT` (``_generated_ppo_trainer.yaml`` flattened, as recorded in
    ``dpo_grpo/data/verl_fixtures/verl_ppo_trainer_keys.json``)."""
    path = resources.files("dpo_grpo.data").joinpath(
        "verl_fixtures", "verl_ppo_trainer_keys.json"
    )
    data = json.loads(path.read_text(encoding="utf-8"))
    if data["verl_commit"] != VERL_COMMIT:
        raise RuntimeError("the recorded verl config is not the one of VERL_COMMIT")
    return data["keys"]


def _literal(text: str):
    text = text.strip()
    words = {"null": None, "true": True, "false": False}
    if text in words:
        return words[text]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip("'\"")


def _value(config: dict, key: str):
    """``config[key]`` with OmegaConf's ``${key}`` and ``${oc.select:key,default}``
    (``.key``: a sibling) resolved, as verl reads it."""
    x = config[key]
    if not (isinstance(x, str) and x.startswith("${") and x.endswith("}")):
        return x
    body, default, has_default = x[2:-1], None, False
    if body.startswith("oc.select:"):
        body, _, fallback = body[len("oc.select:") :].partition(",")
        default, has_default = _literal(fallback), True
    if body.startswith("."):
        body = key.rsplit(".", 1)[0] + body
    if body in config:
        return _value(config, body)
    if has_default:
        return default
    raise ValueError(f"{key}: interpolation {x} names no key")


def _refuse(message: str):
    raise ValueError(f"verl {VERL_COMMIT[:10]} would refuse to start: {message}")


def _micro(get, section: str, param: str, dynamic: bool) -> int | None:
    """verl's check_mutually_exclusive: exactly one of ``param`` (deprecated, global)
    and ``param_per_gpu``, unless dynamic batch sizes are on; the per-GPU value."""
    mbs, per_gpu = get(f"{section}.{param}"), get(f"{section}.{param}_per_gpu")
    if dynamic:
        return None
    if mbs is None and per_gpu is None:
        _refuse(f"[{section}] set at least one of {param!r} or '{param}_per_gpu'")
    if mbs is not None and per_gpu is not None:
        _refuse(f"[{section}] both {param!r} and '{param}_per_gpu' are set")
    return per_gpu


def start_up_check(overrides: dict) -> dict:
    """verl's start-up checks, at :data:`VERL_COMMIT`, of ``main_ppo`` run with
    ``overrides`` on its FSDP workers: re-implemented from ``verl/utils/config.py``
    (``validate_config``, ``check_mutually_exclusive``), ``verl/workers/config/``
    (``ActorConfig`` and ``CriticConfig``: ``__post_init__``, ``validate``) and the
    batch normalisation of ``verl/workers/fsdp_workers.py``, on verl's defaults
    (:func:`verl_defaults`) with ``overrides`` applied. Hydra's own refusal comes
    first: a key that is not in the config, or a required value (``???``) left unset.
    Raises ValueError with verl's reason; returns ``n_gpus``, the per-GPU
    mini-batches after normalisation (``actor_mini_per_gpu``, ``critic_mini_per_gpu``:
    sequences) and whether a critic and a reference are started."""
    _check_dict(overrides)
    defaults = verl_defaults()
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        _refuse(
            f"keys not in the config (Hydra: 'Key ... is not in struct'): {unknown}"
        )
    config = defaults | overrides
    get = lambda key: _value(config, key)  # noqa: E731
    if get(_R + "name") == "???":
        _refuse(f"{_R}name is required ('???'): vllm, sglang or hf")
    if get(_A + "strategy") not in ("fsdp", "fsdp2"):
        raise ValueError("start_up_check covers verl's FSDP workers only")
    n_gpus = get("trainer.n_gpus_per_node") * get("trainer.nnodes")
    if n_gpus < 1:
        _refuse(f"no GPUs: trainer.n_gpus_per_node x trainer.nnodes = {n_gpus}")
    batch, n = get("data.train_batch_size"), get(_R + "n")
    dynamic = get(_A + "use_dynamic_bsz")
    if not dynamic and (batch * n) % n_gpus:
        _refuse(f"real_train_batch_size ({batch * n}) must be divisible by {n_gpus}")
    # ActorConfig.__post_init__ and FSDPActorConfig.validate
    if get(_A + "loss_agg_mode") not in (
        "token-mean",
        "seq-mean-token-sum",
        "seq-mean-token-mean",
        "seq-mean-token-sum-norm",
    ):
        _refuse(f"invalid loss_agg_mode {get(_A + 'loss_agg_mode')!r}")
    actor_mini = _trained(get, _A[:-1], n, batch, n_gpus, dynamic)
    use_ref = bool(get("algorithm.use_kl_in_reward") or get(_A + "use_kl_loss"))
    if use_ref:
        _micro(get, "actor_rollout_ref.ref", "log_prob_micro_batch_size", dynamic)
    _micro(get, _R[:-1], "log_prob_micro_batch_size", dynamic)
    if get("reward_model.enable") and not (
        get("reward_model.use_dynamic_bsz") or get("reward_model.use_reward_loop")
    ):
        _micro(get, "reward_model", "micro_batch_size", False)
    if get(_R + "val_kwargs.do_sample") and not get(_R + "temperature") > 0:
        _refuse("validation sampling needs rollout.temperature > 0")
    tp = get(_R + "tensor_model_parallel_size") * get(_R + "data_parallel_size")
    if n_gpus % (tp * get(_R + "pipeline_model_parallel_size")):
        _refuse(
            f"the rollout's world size {n_gpus} is not divisible by its tp x dp x pp"
        )
    critic = get("critic.enable")
    critic = get("algorithm.adv_estimator") == "gae" if critic is None else critic
    critic_mini = None
    if critic:
        dynamic = get("critic.use_dynamic_bsz")
        n_c = get("critic.rollout_n")
        critic_mini = _trained(get, "critic", n_c, batch, n_gpus, dynamic)
    return {
        "n_gpus": n_gpus,
        "actor_mini_per_gpu": actor_mini,
        "critic_mini_per_gpu": critic_mini,
        "critic": bool(critic),
        "reference": use_ref,
    }


def _trained(get, section: str, n: int, batch: int, n_gpus: int, dynamic: bool):
    """The checks of a trained model's batch (the actor's or the critic's config and
    FSDP worker): its micro-batch size given once, ``ppo_mini_batch_size`` (prompts) at
    most the batch and, times ``n`` over the data-parallel GPUs, a positive
    multiple of the per-GPU micro-batch; returns that per-GPU mini-batch."""
    role = section.split(".")[-1]
    mbs = _micro(get, section, "ppo_micro_batch_size", dynamic)
    mini = get(f"{section}.ppo_mini_batch_size")
    sp = get(f"{section}.ulysses_sequence_parallel_size")
    if dynamic:
        return None
    if batch < mini:
        _refuse(f"train_batch_size ({batch}) < {role}.ppo_mini_batch_size ({mini})")
    glob = get(f"{section}.ppo_micro_batch_size")
    if glob is not None:  # deprecated: a global size, divided over the GPUs
        if mini % glob or glob * sp < n_gpus:
            _refuse(
                f"[{role}] ppo_micro_batch_size ({glob}) must divide "
                f"ppo_mini_batch_size ({mini}) and, x sp ({sp}), be >= {n_gpus} GPUs"
            )
        mbs = glob // (n_gpus // sp)
    per_gpu = mini * n // (n_gpus // sp)
    if per_gpu <= 0:
        _refuse(f"[{role}] ppo_mini_batch_size {mini} is 0 per GPU after normalisation")
    if per_gpu % mbs:
        _refuse(
            f"[{role}] normalized ppo_mini_batch_size {per_gpu} should be divisible by "
            f"ppo_micro_batch_size_per_gpu {mbs}"
        )
    return per_gpu
