"""Direct Preference Optimisation: the loss, its gradient, and the closed-form optimum
it is derived from.

Shapes: every log-prob argument is a sequence log-prob array of one common shape
``(P,)`` (one entry per pair). Formula:
``logits = beta * ((pi_c - pi_r) - (ref_c - ref_r))`` and, for ``loss_type="sigmoid"``,
``loss = mean(-log sigmoid(logits))``; the other TRL 1.16.0 loss types are listed in
:func:`dpo_pair_losses`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validation as v
from ..reference.dpo import log_sigmoid, sigmoid

#: TRL 1.16.0's DPOConfig.loss_type values (all work on sequence log-probs)
DPO_LOSS_TYPES = (
    "sigmoid",
    "hinge",
    "ipo",
    "exo_pair",
    "nca_pair",
    "robust",
    "bco_pair",
    "sppo_hard",
    "aot",
    "aot_unpaired",
    "apo_zero",
    "apo_down",
    "discopop",
    "sigmoid_norm",
    "sft",
)
#: the loss types that read label_smoothing in TRL 1.16.0
LABEL_SMOOTHING_LOSS_TYPES = ("robust", "exo_pair", "aot", "aot_unpaired")
#: the loss types that divide by completion token counts
LENGTH_NORMALISED_LOSS_TYPES = ("ipo", "sigmoid_norm", "sft")


class DPOOutput(NamedTuple):
    """Result of :func:`dpo_loss`. The first two fields are ``loss, logits``.

    :func:`dpo_grpo.torch_ops.dpo_loss` returns its tensor subclass (``grad_policy_*``
    None there: autograd computes them)."""

    loss: float
    logits: np.ndarray  #: beta * (policy gap - reference gap), shape (P,)
    chosen_rewards: np.ndarray  #: implicit reward beta * (pi_c - ref_c), shape (P,)
    rejected_rewards: np.ndarray  #: implicit reward beta * (pi_r - ref_r), shape (P,)
    grad_policy_chosen: np.ndarray | None  #: d loss / d policy_chosen, shape (P,)
    #: d loss / d policy_rejected (= -grad_policy_chosen for sigmoid, hinge, robust)
    grad_policy_rejected: np.ndarray | None
    #: per-pair loss sum_k w_k l_k, shape (P,); loss = its mean (aot*: sorted order)
    losses: np.ndarray | None = None
    logps_chosen: float | None = None  #: mean of policy_chosen (TRL's logps/chosen)
    #: mean of policy_rejected (TRL's logps/rejected)
    logps_rejected: float | None = None

    @property
    def metrics(self) -> dict:
        """TRL's logged names: ``rewards/chosen``, ``rewards/rejected``,
        ``rewards/accuracies``, ``rewards/margins``, ``logps/chosen``,
        ``logps/rejected`` (the same for every loss type)."""
        c, r = self.chosen_rewards, self.rejected_rewards
        out = {
            "rewards/chosen": self._mean(c),
            "rewards/rejected": self._mean(r),
            "rewards/accuracies": self._mean(c > r),
            "rewards/margins": self._mean(c - r),
        }
        if self.logps_chosen is not None:
            out["logps/chosen"] = self.logps_chosen
            out["logps/rejected"] = self.logps_rejected
        return out

    def _mean(self, x):
        """A logged mean, as a Python float (:class:`dpo_grpo.torch_ops.DPOOutput`: a
        0-d tensor)."""
        return float(x.mean())


class DPOOptions(NamedTuple):
    """Validated options of :func:`dpo_loss` (shared by the NumPy and torch
    implementations)."""

    beta: float
    loss_types: tuple  #: TRL's ``DPOConfig.loss_type`` as a tuple of names
    #: one float per loss type (TRL: 1.0 each when ``loss_weights`` is None)
    loss_weights: tuple
    label_smoothing: float
    discopop_tau: float
    #: (log(1 - eps), log(eps)) in float32, as TRL computes them for exo_pair; else None
    exo_log_p: tuple | None

    @property
    def needs_lengths(self) -> tuple:
        """``(chosen, rejected)``: whether the loss types read the completion token
        counts."""
        return (
            any(t in LENGTH_NORMALISED_LOSS_TYPES for t in self.loss_types),
            any(t in ("ipo", "sigmoid_norm") for t in self.loss_types),
        )


def dpo_options(
    beta, loss_type, loss_weights=None, label_smoothing=0.0, discopop_tau=0.05
) -> DPOOptions:
    """Check every option of :func:`dpo_loss` and return them validated: the one place
    where they are checked (as TRL's ``DPOConfig.__post_init__`` and
    ``DPOTrainer.__init__`` do); the loss bodies only compute.

    ``loss_type``: one name or a non-empty list; ``loss_weights``: None or one finite
    weight per name. ``label_smoothing`` must be 0 unless a loss type reads it
    (``robust``, ``exo_pair``, ``aot``, ``aot_unpaired``; TRL 1.16.0 ignores it for the
    others and we refuse an argument that would do nothing); ``robust`` needs it in
    [0, 0.5), ``exo_pair`` in (0, 1) (TRL raises for 0), ``aot``/``aot_unpaired`` in
    [0, 1].
    """
    beta = v.scalar(beta, "beta", positive=True)
    if isinstance(loss_type, str):
        types = (loss_type,)
    elif isinstance(loss_type, (list, tuple)):
        types = tuple(loss_type)
        if not types:
            raise ValueError(
                "loss_type must name at least one loss type, got an empty list"
            )
    else:
        raise TypeError(
            "loss_type must be a string or a list of strings, got "
            f"{type(loss_type).__name__}"
        )
    for t in types:
        v.choice(t, "loss_type", DPO_LOSS_TYPES)
    if loss_weights is None:
        weights = (1.0,) * len(types)
    else:
        if isinstance(loss_weights, (str, bytes, dict)) or not hasattr(
            loss_weights, "__len__"
        ):
            raise TypeError(
                "loss_weights must be None or a list of numbers, got "
                f"{type(loss_weights).__name__}"
            )
        weights = tuple(v.scalar(w, "loss_weights") for w in loss_weights)
        if len(weights) != len(types):
            raise ValueError(
                f"loss_weights must have one weight per loss type ({len(types)}), got "
                f"{len(weights)}"
            )
    s = v.scalar(label_smoothing, "label_smoothing", nonnegative=True)
    readers = [t for t in types if t in LABEL_SMOOTHING_LOSS_TYPES]
    if s != 0.0 and not readers:
        raise ValueError(
            f"label_smoothing={s} has no effect for loss_type={loss_type!r} in TRL "
            "1.16.0 (only robust, exo_pair, aot and aot_unpaired read it); use one "
            "of those, or label_smoothing=0"
        )
    if "robust" in types and not s < 0.5:
        raise ValueError(
            f"label_smoothing must lie in [0, 0.5) for loss_type='robust', got {s}"
        )
    if "exo_pair" in types and not 0.0 < s < 1.0:
        raise ValueError(
            "label_smoothing must lie in (0, 1) for loss_type='exo_pair' (the EXO "
            f"paper recommends 1e-3), got {s}"
        )
    if ("aot" in types or "aot_unpaired" in types) and s > 1.0:
        raise ValueError(
            "label_smoothing must lie in [0, 1] for loss_type='aot'/'aot_unpaired', "
            f"got {s}"
        )
    tau = v.scalar(discopop_tau, "discopop_tau", positive=True)
    exo = None
    if "exo_pair" in types:
        # TRL: epsilon = torch.tensor(label_smoothing) is float32, and so are
        # log1p(-epsilon) and log(epsilon). We compute them in float32 too (NumPy's
        # float32 log1p/log). Float32 logs are not always correctly rounded, and torch's
        # and NumPy's may differ by one float32 ulp (e.g. log1p(-0.1)): the loss then
        # differs from TRL's by at most that ulp (<= 2**-24 * |log eps|), below 1e-6 for
        # eps >= 1e-3.
        e32 = np.float32(s)
        exo = (float(np.log1p(-e32)), float(np.log(e32)))
    return DPOOptions(beta, types, weights, s, tau, exo)


def _lengths(x, name, shape):
    if x is None:
        return None
    n = v.as_float_array(x, name)
    if n.shape != shape:
        raise ValueError(
            f"{name} must have shape {shape} (one token count per pair), got {n.shape}"
        )
    if (n < 1).any() or (n != np.round(n)).any():
        raise ValueError(f"{name} must hold whole token counts >= 1")
    return n


def _sorted_grad(d_sorted, order):
    """Scatter per-position derivatives of a sorted vector back to the unsorted entries
    (``order`` = argsort)."""
    g = np.empty_like(d_sorted)
    g[order] = d_sorted
    return g


def dpo_pair_losses(loss_type, pc, pr, rc, rr, o: DPOOptions, lc=None, lr=None):
    """One TRL 1.16.0 DPO loss type on sequence log-probs:
    ``(losses, d mean / d pc, d mean / d pr)``, shape (P,).

    ``uc = pc - rc``, ``ur = pr - rr`` (log-ratios), ``z = beta (uc - ur)``,
    ``s = label_smoothing``, ``lc, lr`` the completion token counts, ``sg`` = sigmoid,
    ``ls`` = log sigmoid:

    - ``sigmoid``: ``-ls(z)`` (DPO, :cite:`rafailov2023dpo`);
    - ``hinge``: ``max(0, 1 - z)`` (SLiC, :cite:`zhao2023slic`);
    - ``ipo``: ``(uc / lc - ur / lr - 1 / (2 beta))^2`` (IPO, :cite:`azar2023ipo`; TRL
      divides by token counts);
    - ``exo_pair``: ``KL(q || p)`` with ``q = (sg(z), sg(-z))``, ``p = (1 - s, s)``
      (EXO, :cite:`ji2024exo`);
    - ``nca_pair``: ``-ls(beta uc) - ls(-beta uc) / 2 - ls(-beta ur) / 2`` (NCA,
      :cite:`chen2024nca`);
    - ``robust``: ``(-(1 - s) ls(z) + s ls(-z)) / (1 - 2s)`` (robust DPO,
      :cite:`chowdhury2024robust`);
    - ``bco_pair``: ``-ls(beta uc) - ls(-beta ur)`` (BCO, :cite:`jung2024bco`; TRL
      1.16.0 keeps no running reward mean here: the loss takes no state);
    - ``sppo_hard``: ``(uc - 1 / (2 beta))^2 + (ur + 1 / (2 beta))^2`` (SPPO with hard
      labels, :cite:`wu2024sppo`);
    - ``aot``: ``-(1 - s) ls(beta d) - s ls(-beta d)``,
      ``d = sort(pc - pr) - sort(rc - rr)`` over the batch, and ``aot_unpaired`` with
      ``d = sort(uc) - sort(ur)`` (AOT, :cite:`melnyk2024aot`): losses are per sorted
      position, so they couple the pairs of a batch;
    - ``apo_zero``: ``1 - sg(beta uc) + sg(beta ur)``; ``apo_down``:
      ``sg(beta uc) + 1 - sg(z)`` (APO, :cite:`doosterlinck2024apo`);
    - ``discopop``: ``(1 - g) (-ls(z)) + g exp(-z)`` with ``g = sg(z / tau)`` (DiscoPOP,
      :cite:`lu2024discopop`);
    - ``sigmoid_norm``: ``-ls(beta (uc / lc - ur / lr))``;
    - ``sft``: ``-sum(pc) / sum(lc)`` for every pair (the mean per-token NLL of the
      chosen completions, which equals TRL's when each ``pc`` sums ``lc`` per-token
      log-probs); its gradient w.r.t. ``pr`` is 0.
    """
    n = pc.size
    b = o.beta
    uc, ur = pc - rc, pr - rr
    z = b * (uc - ur)
    s = o.label_smoothing
    if loss_type == "sigmoid":
        losses, dz = -log_sigmoid(z), -sigmoid(-z)
        gc = dz * b / n
        return losses, gc, -gc
    if loss_type == "hinge":
        losses, dz = np.maximum(0.0, 1.0 - z), np.where(z < 1.0, -1.0, 0.0)
        gc = dz * b / n
        return losses, gc, -gc
    if loss_type == "robust":
        losses = (-(1 - s) * log_sigmoid(z) + s * log_sigmoid(-z)) / (1 - 2 * s)
        gc = (-(1 - s) * sigmoid(-z) - s * sigmoid(z)) / (1 - 2 * s) * b / n
        return losses, gc, -gc
    if loss_type in ("ipo", "sigmoid_norm"):
        d = uc / lc - ur / lr
        if loss_type == "ipo":
            e = d - 1 / (2 * b)
            losses, dd = e**2, 2 * e
        else:
            losses, dd = -log_sigmoid(b * d), -b * sigmoid(-b * d)
        return losses, dd / lc / n, -dd / lr / n
    if loss_type == "exo_pair":
        log_pw, log_pl = o.exo_log_p
        qw, ql = sigmoid(z), sigmoid(-z)
        losses = qw * (log_sigmoid(z) - log_pw) + ql * (log_sigmoid(-z) - log_pl)
        gc = qw * ql * (z - log_pw + log_pl) * b / n
        return losses, gc, -gc
    if loss_type in ("nca_pair", "bco_pair"):
        xc, xr = b * uc, b * ur
        if loss_type == "nca_pair":
            losses = -log_sigmoid(xc) - 0.5 * log_sigmoid(-xc) - 0.5 * log_sigmoid(-xr)
            return (
                losses,
                b * (-sigmoid(-xc) + 0.5 * sigmoid(xc)) / n,
                b * 0.5 * sigmoid(xr) / n,
            )
        losses = -log_sigmoid(xc) - log_sigmoid(-xr)
        return losses, -b * sigmoid(-xc) / n, b * sigmoid(xr) / n
    if loss_type == "sppo_hard":
        ec, er = uc - 0.5 / b, ur + 0.5 / b
        return ec**2 + er**2, 2 * ec / n, 2 * er / n
    if loss_type in ("aot", "aot_unpaired"):
        if loss_type == "aot":
            x, y = pc - pr, rc - rr
        else:
            x, y = uc, ur
        ox, oy = np.argsort(x, kind="stable"), np.argsort(y, kind="stable")
        zs = b * (x[ox] - y[oy])
        losses = -log_sigmoid(zs) * (1 - s) - log_sigmoid(-zs) * s
        dzs = (-(1 - s) * sigmoid(-zs) + s * sigmoid(zs)) * b / n
        gx = _sorted_grad(dzs, ox)
        if loss_type == "aot":
            return losses, gx, -gx
        return losses, gx, -_sorted_grad(dzs, oy)  # y = ur enters with a minus sign
    if loss_type in ("apo_zero", "apo_down"):
        sc = sigmoid(b * uc)
        if loss_type == "apo_zero":
            sr = sigmoid(b * ur)
            return 1 - sc + sr, -b * sc * (1 - sc) / n, b * sr * (1 - sr) / n
        sz = sigmoid(z)
        gz = b * sz * (1 - sz) / n
        return sc + 1 - sz, b * sc * (1 - sc) / n - gz, gz
    if loss_type == "discopop":
        g = sigmoid(z / o.discopop_tau)
        with np.errstate(over="raise"):
            try:
                ez = np.exp(-z)
            except FloatingPointError:
                raise ValueError(
                    "exp overflowed in the discopop loss: beta * (policy gap - "
                    "reference gap) is below about -709 for some pair"
                ) from None
        ls = log_sigmoid(z)
        losses = -ls * (1 - g) + ez * g
        dz = -sigmoid(-z) * (1 - g) - ez * g + g * (1 - g) / o.discopop_tau * (ls + ez)
        gc = dz * b / n
        return losses, gc, -gc
    # sft
    total = lc.sum()
    loss = -pc.sum() / total
    return np.full(n, loss), np.full(n, -1.0 / total), np.zeros(n)


def dpo_loss(
    policy_chosen,
    policy_rejected,
    ref_chosen,
    ref_rejected,
    beta=0.1,
    *,
    loss_type="sigmoid",
    label_smoothing=0.0,
    loss_weights=None,
    discopop_tau=0.05,
    chosen_lengths=None,
    rejected_lengths=None,
) -> DPOOutput:
    """DPO loss on sequence log-probs, with every TRL 1.16.0 ``DPOConfig.loss_type``
    (see :func:`dpo_pair_losses`).

    ``loss_type`` is one name or a list (TRL's ``loss_type=[...]``), combined as
    ``sum_k loss_weights[k] * mean(l_k)`` (weights 1 when ``loss_weights`` is None).
    ``logits`` is ``z = beta * ((pi_c - pi_r) - (ref_c - ref_r))`` for every type; the
    implicit rewards ``beta * (pi - ref)`` and the metrics are TRL's, whatever the type.
    ``ipo`` and ``sigmoid_norm`` need ``chosen_lengths`` and ``rejected_lengths``,
    ``sft`` needs ``chosen_lengths``: the completion token counts, one per pair (TRL
    counts the completion mask). Passing them (or ``label_smoothing``) to a loss type
    that does not read them raises ``ValueError``. The gradients are analytic (tested
    against finite differences). TRL's ``f_divergence_type``, ``ld_alpha`` and
    ``use_weighting`` are not implemented (their defaults: reverse KL, no length
    down-weighting, no weighting).
    """
    pc = v.as_float_array(policy_chosen, "policy_chosen")
    pr = v.as_float_array(policy_rejected, "policy_rejected")
    rc = v.as_float_array(ref_chosen, "ref_chosen")
    rr = v.as_float_array(ref_rejected, "ref_rejected")
    v.same_shape(policy_chosen=pc, policy_rejected=pr, ref_chosen=rc, ref_rejected=rr)
    o = dpo_options(beta, loss_type, loss_weights, label_smoothing, discopop_tau)
    lc = _lengths(chosen_lengths, "chosen_lengths", pc.shape)
    lr = _lengths(rejected_lengths, "rejected_lengths", pc.shape)
    need_c, need_r = o.needs_lengths
    for name, given, needed in (
        ("chosen_lengths", lc, need_c),
        ("rejected_lengths", lr, need_r),
    ):
        if needed and given is None:
            raise ValueError(
                f"{name} is required for loss_type={loss_type!r} (it divides by the "
                "completion token counts)"
            )
        if given is not None and not needed:
            raise ValueError(
                f"{name} has no effect for loss_type={loss_type!r} (only ipo, "
                "sigmoid_norm and sft read token counts; sft reads chosen_lengths "
                "only)"
            )

    losses = np.zeros(pc.shape)
    grad_chosen = np.zeros(pc.shape)
    grad_rejected = np.zeros(pc.shape)
    for t, w in zip(o.loss_types, o.loss_weights):
        l_k, gc_k, gr_k = dpo_pair_losses(t, pc, pr, rc, rr, o, lc, lr)
        losses = losses + w * l_k
        grad_chosen = grad_chosen + w * gc_k
        grad_rejected = grad_rejected + w * gr_k
    return DPOOutput(
        loss=float(losses.mean()),
        logits=o.beta * ((pc - pr) - (rc - rr)),
        chosen_rewards=o.beta * (pc - rc),
        rejected_rewards=o.beta * (pr - rr),
        grad_policy_chosen=grad_chosen,
        grad_policy_rejected=grad_rejected,
        losses=losses,
        logps_chosen=float(pc.mean()),
        logps_rejected=float(pr.mean()),
    )
