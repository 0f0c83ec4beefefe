"""Parity with TRL 1.16.0 for its newer GRPO loss types (cispo, sapo, luspo, vespo) and
the whole DPO loss family.

Fixtures: ``trl_grpo_loss_types.json`` (``trl.GRPOTrainer._compute_loss``) and
``trl_dpo_loss_family.json`` (``trl.DPOTrainer._compute_loss``), written by
``scripts/make_trl_fixtures.py`` from real trainer objects (see that script and
``tests/trl_exact/test_trl_parity.py``). Both the NumPy package and
``dpo_grpo.torch_ops`` (float64, when torch is installed) are checked.

Tolerances: loss and gradients 1e-10 absolute (float64 on both sides), ``kl`` and
``vespo/phi_seq_mean`` 1e-10; ``clip_ratio/*``, ``cispo_clip_ratio`` and
``rewards/accuracies`` are float32 in TRL (``bool.float()``): 1e-7. ``exo_pair``: TRL
computes ``log(eps)`` and ``log1p(-eps)`` in float32
(``torch.tensor(label_smoothing)``), and so do we (NumPy float32). Float32 logs are not
always correctly rounded, and torch's and NumPy's may differ by one ulp (``log1p(-0.1)``
does; the fixture's eps = 1e-3 and 0.2 agree here). One ulp of ``log eps`` is at most
``2**-24 |log eps|`` (4e-7 for eps = 1e-3); the loss moves by at most that (its weights
sigmoid(+-z) are <= 1) and the gradients by less, so exo_pair cases are compared to 1e-6
absolute.
"""

from __future__ import annotations

import numpy as np
import pytest
from dpo_grpo.trl_exact import dpo_loss, grpo_loss
from dpo_grpo.trl_exact.dpo import (
    DPO_LOSS_TYPES,
    LABEL_SMOOTHING_LOSS_TYPES,
    dpo_options,
)
from dpo_grpo.trl_exact.grpo import (
    LOSS_TYPES,
    GRPOOptions,
    checked_batch,
    grpo_loss_from_options,
)
from testing_support import dpo_case, grpo_case, trl_fixture

EXACT = dict(rtol=0.0, atol=1e-10)
FLOAT32_RATIO = dict(rtol=0.0, atol=1e-7)
EXO = dict(
    rtol=0.0, atol=1e-6
)  # exo_pair: one float32 ulp of log(eps) (module docstring)
FLOAT32_METRICS = (
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "clip_ratio/low_min",
    "clip_ratio/high_max",
    "cispo_clip_ratio",
    "rewards/accuracies",
)
GRPO = trl_fixture("trl_grpo_loss_types.json")
DPO = trl_fixture("trl_dpo_loss_family.json")


def _ids(cases):
    return [c["name"] for c in cases]


def _check_grpo(loss, grad, metrics, case):
    np.testing.assert_allclose(loss, case["loss"], **EXACT, err_msg="loss")
    mask = np.array(case["inputs"]["mask"], dtype=bool)
    np.testing.assert_allclose(
        grad, np.array(case["grad_new_logps"]), **EXACT, err_msg="d loss / d new_logps"
    )
    assert np.all(grad[~mask] == 0.0), "gradient must be exactly zero on padding"
    assert set(metrics) == set(case["metrics"]), "metric names differ from TRL's"
    for name, trl_value in case["metrics"].items():
        tol = FLOAT32_RATIO if name in FLOAT32_METRICS else EXACT
        np.testing.assert_allclose(float(metrics[name]), trl_value, **tol, err_msg=name)


@pytest.mark.parametrize("case", GRPO["cases"], ids=_ids(GRPO["cases"]))
def test_grpo_loss_types_match_trl(case):
    args, kwargs = grpo_case(case)
    out = grpo_loss(*args, **kwargs)
    _check_grpo(out.loss, np.asarray(out.grad), out.metrics, case)


@pytest.mark.parametrize("case", GRPO["cases"], ids=_ids(GRPO["cases"]))
def test_torch_grpo_loss_types_match_trl(case):
    torch = pytest.importorskip("torch")
    from dpo_grpo import torch_ops

    (new, old, ref, adv, mask), kwargs = grpo_case(case)
    new_t = torch.tensor(new, dtype=torch.float64, requires_grad=True)
    old_t = (
        new_t.detach()
        if case["inputs"]["old_logps"] is None
        else torch.tensor(old, dtype=torch.float64)
    )
    ref_t = None if ref is None else torch.tensor(ref, dtype=torch.float64)
    out = torch_ops.grpo_loss(
        new_t,
        old_t,
        ref_t,
        torch.tensor(adv, dtype=torch.float64),
        torch.tensor(mask),
        **kwargs,
    )
    out.loss.backward()
    _check_grpo(
        out.loss.item(),
        new_t.grad.numpy(),
        {k: v.item() for k, v in out.metrics.items()},
        case,
    )


def test_grpo_fixture_covers_every_new_type_and_branch():
    cases = GRPO["cases"]
    for loss_type in ("cispo", "sapo", "luspo", "vespo"):
        mine = [c for c in cases if c["options"]["loss_type"] == loss_type]
        grid = {
            (
                c["options"]["importance_sampling_level"],
                c["options"]["beta"] != 0,
                c["options"]["use_bias_correction_kl"],
                c["inputs"]["old_logps"] is None,
            )
            for c in mine
        }
        for level in ("token", "sequence"):
            assert {
                (level, False, False, False),
                (level, True, False, False),
                (level, True, True, False),
                (level, True, True, True),
            } <= grid, (loss_type, level)
        assert any(np.ndim(c["inputs"]["advantages"]) == 2 for c in mine), loss_type
        assert any(
            min(map(sum, c["inputs"]["mask"])) < len(c["inputs"]["mask"][0])
            for c in mine
        )  # ragged
    # the caps and gates act: CISPO caps some positive-advantage ratios, VESPO weights
    # far from 1 and 0 occur
    cispo = [
        c["metrics"]["cispo_clip_ratio"]
        for c in cases
        if c["options"]["loss_type"] == "cispo"
    ]
    assert max(cispo) > 0 and min(cispo) == 0
    assert {
        c["options"]["epsilon_high"]
        for c in cases
        if c["options"]["loss_type"] == "cispo"
    } >= {0.2, 1.28, 5.0}
    phi = [
        c["metrics"]["vespo/phi_seq_mean"]
        for c in cases
        if c["options"]["loss_type"] == "vespo"
    ]
    assert min(phi) < 0.5 and max(phi) > 0.5
    assert any(
        c["options"]["sapo_temperature_neg"] != 1.05
        for c in cases
        if c["options"]["loss_type"] == "sapo"
    )


def test_float32_constants_matter_and_are_used():
    """SAPO's and VESPO's constants are float32 in TRL: the float64 1.05 gives a visibly
    different loss."""
    case = next(c for c in GRPO["cases"] if c["name"] == "far-sapo-token-beta0.04")
    args, kwargs = grpo_case(case)
    sapo = GRPOOptions(beta=0.0, loss_type="sapo")
    assert sapo.checked(7).sapo_temperature_neg == float(np.float32(1.05)) != 1.05
    # the math with an unrounded temperature
    o = GRPOOptions(
        beta=kwargs["beta"],
        loss_type="sapo",
        use_bias_correction_kl=kwargs["use_bias_correction_kl"],
    )
    o = o.checked(7)._replace(sapo_temperature_neg=1.05)
    new = np.asarray(args[0], dtype=float)
    exact64 = grpo_loss_from_options(*checked_batch(new, *args[1:], o.beta), o).loss
    assert (
        abs(exact64 - case["loss"]) > 1e-10
    )  # float64 constants would fail the 1e-10 parity


def test_grpo_options_reject_bad_new_options():
    base = dict(beta=0.0, loss_type="sapo")
    for name, bad in (
        ("sapo_temperature_pos", 0.0),
        ("sapo_temperature_neg", -1.0),
    ):
        with pytest.raises(ValueError, match=name):
            GRPOOptions(**base, **{name: bad}).checked(7)
    with pytest.raises(TypeError, match="vespo_k_neg"):
        GRPOOptions(**base, vespo_k_neg="3").checked(7)
    # every loss type of TRL 1.16.0 (more may be added: README, "Adding a loss type")
    assert set(LOSS_TYPES) >= {
        "grpo",
        "bnpo",
        "dr_grpo",
        "dapo",
        "cispo",
        "sapo",
        "luspo",
        "vespo",
    }


# --------------------------------------------------------------------------------------
# DPO loss family
# --------------------------------------------------------------------------------------


def _check_dpo(loss, gc, gr, metrics, case):
    tol = EXO if "exo_pair" in case["options"]["loss_type"] else EXACT
    np.testing.assert_allclose(loss, case["loss"], **tol, err_msg="loss")
    np.testing.assert_allclose(
        gc, case["grad_policy_chosen"], **tol, err_msg="d loss / d policy_chosen"
    )
    np.testing.assert_allclose(
        gr, case["grad_policy_rejected"], **tol, err_msg="d loss / d policy_rejected"
    )
    assert set(metrics) == set(case["metrics"]), "metric names differ from TRL's"
    for name, value in metrics.items():
        tol = FLOAT32_RATIO if name in FLOAT32_METRICS else EXACT
        np.testing.assert_allclose(
            float(value), case["metrics"][name], **tol, err_msg=name
        )


@pytest.mark.parametrize("case", DPO["cases"], ids=_ids(DPO["cases"]))
def test_dpo_loss_family_matches_trl(case):
    arrays, beta, kwargs = dpo_case(case)
    out = dpo_loss(*arrays, beta, **kwargs)
    _check_dpo(
        out.loss, out.grad_policy_chosen, out.grad_policy_rejected, out.metrics, case
    )
    np.testing.assert_allclose(out.losses.mean(), out.loss, rtol=0, atol=1e-15)


@pytest.mark.parametrize("case", DPO["cases"], ids=_ids(DPO["cases"]))
def test_torch_dpo_loss_family_matches_trl(case):
    torch = pytest.importorskip("torch")
    from dpo_grpo import torch_ops

    arrays, beta, kwargs = dpo_case(case)
    pc, pr = (
        torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays[:2]
    )
    rc, rr = (torch.tensor(a, dtype=torch.float64) for a in arrays[2:])
    out = torch_ops.dpo_loss(pc, pr, rc, rr, beta, **kwargs)
    out.loss.backward()
    grads = [
        np.zeros(len(arrays[0])) if x.grad is None else x.grad.numpy() for x in (pc, pr)
    ]  # sft: pr unused
    _check_dpo(
        out.loss.item(), *grads, {k: v.item() for k, v in out.metrics.items()}, case
    )


def test_dpo_fixture_covers_every_loss_type():
    seen = {t for c in DPO["cases"] for t in c["options"]["loss_type"]}
    assert seen == set(DPO_LOSS_TYPES)
    assert any(
        len(c["options"]["loss_type"]) > 1 and c["options"]["loss_weights"] != [1.0] * 3
        for c in DPO["cases"]
    )
    assert any(
        c["options"]["discopop_tau"] != 0.05
        for c in DPO["cases"]
        if "discopop" in c["options"]["loss_type"]
    )
    # label_smoothing is set only where TRL reads it (dpo_case passes it only there)
    assert all(
        c["options"]["label_smoothing"] == 0.0
        for c in DPO["cases"]
        if not set(c["options"]["loss_type"]) & set(LABEL_SMOOTHING_LOSS_TYPES)
    )


def test_exo_pair_float32_logs_within_one_ulp_of_torchs():
    torch = pytest.importorskip("torch")
    for ls in (1e-3, 0.01, 0.05, 0.1, 0.2, 0.3, 0.45, 0.9):
        eps = torch.tensor(ls)
        ours = dpo_options(0.1, "exo_pair", label_smoothing=ls).exo_log_p
        theirs = (torch.log1p(-eps).item(), torch.log(eps).item())
        for a, b in zip(ours, theirs):
            assert np.float32(a) == a  # a float32 value, as in TRL
            assert abs(a - b) <= np.spacing(np.float32(abs(b))), (ls, a, b)


def test_dpo_options_checks():
    with pytest.raises(ValueError, match="label_smoothing"):
        dpo_options(0.1, "exo_pair")  # TRL raises for exo_pair without smoothing
    with pytest.raises(ValueError, match="label_smoothing"):
        dpo_options(
            0.1, ["sigmoid", "ipo"], label_smoothing=0.1
        )  # no reader: refused, not ignored
    with pytest.raises(ValueError, match="loss_weights"):
        dpo_options(0.1, ["sigmoid", "ipo"], loss_weights=[1.0])
    with pytest.raises(ValueError, match="loss_type"):
        dpo_options(0.1, [])
    with pytest.raises(ValueError, match="loss_type"):
        dpo_options(0.1, ["sigmoid", "kto"])
    with pytest.raises(ValueError, match="discopop_tau"):
        dpo_options(0.1, "discopop", discopop_tau=0.0)
    p = [-1.0, -2.0]
    with pytest.raises(ValueError, match="chosen_lengths"):
        dpo_loss(p, p, p, p, loss_type="ipo", rejected_lengths=[1, 2])
    with pytest.raises(ValueError, match="rejected_lengths"):
        dpo_loss(p, p, p, p, loss_type="sigmoid_norm", chosen_lengths=[1, 2])
    with pytest.raises(ValueError, match="rejected_lengths"):
        dpo_loss(
            p, p, p, p, loss_type="sft", chosen_lengths=[1, 2], rejected_lengths=[1, 2]
        )
    with pytest.raises(ValueError, match="chosen_lengths"):
        dpo_loss(p, p, p, p, loss_type="sigmoid", chosen_lengths=[1, 2])
    with pytest.raises(ValueError, match="chosen_lengths"):
        dpo_loss(p, p, p, p, loss_type="sft", chosen_lengths=[0, 2])
    with pytest.raises(ValueError, match="chosen_lengths"):
        dpo_loss(p, p, p, p, loss_type="sft", chosen_lengths=[1.5, 2])


def _fd(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("loss_type", DPO_LOSS_TYPES)
def test_dpo_gradients_match_finite_differences(loss_type):
    rng = np.random.default_rng(sum(map(ord, loss_type)))
    pc, pr = -rng.uniform(1, 10, 6), -rng.uniform(1, 10, 6)
    rc, rr = pc - rng.normal(0, 2, 6), pr - rng.normal(0, 2, 6)
    kw = {"label_smoothing": 0.15} if loss_type in LABEL_SMOOTHING_LOSS_TYPES else {}
    if loss_type in ("ipo", "sigmoid_norm", "sft"):
        kw["chosen_lengths"] = rng.integers(1, 9, 6)
    if loss_type in ("ipo", "sigmoid_norm"):
        kw["rejected_lengths"] = rng.integers(1, 9, 6)
    out = dpo_loss(pc, pr, rc, rr, 0.3, loss_type=loss_type, **kw)
    x = np.concatenate([pc, pr])
    fd = _fd(
        lambda z: dpo_loss(z[:6], z[6:], rc, rr, 0.3, loss_type=loss_type, **kw).loss, x
    )
    np.testing.assert_allclose(
        np.concatenate([out.grad_policy_chosen, out.grad_policy_rejected]),
        fd,
        rtol=0,
        atol=1e-7,
    )
    assert np.any(out.grad_policy_chosen != 0)


@pytest.mark.parametrize("loss_type", ["cispo", "sapo", "luspo", "vespo"])
@pytest.mark.parametrize("level", ["token", "sequence"])
def test_grpo_gradients_match_finite_differences(loss_type, level):
    """cispo and vespo detach their weights (TRL's ``.detach()``/``no_grad``): moving
    new and old together keeps the weight and the ratio fixed, so the finite difference
    sees only the ``log pi`` and k3 terms they differentiate."""
    rng = np.random.default_rng(7)
    mask = (np.arange(5)[None] < np.array([5, 3, 1, 4])[:, None]).astype(int)
    old = np.log(rng.uniform(0.1, 0.9, (4, 5)))
    new = old + rng.normal(0, 0.6, (4, 5))
    ref = np.log(rng.uniform(0.1, 0.9, (4, 5)))
    adv = np.array([1.0, -0.5, 0.8, -1.2])
    detached = loss_type in ("cispo", "vespo")
    kw = dict(
        loss_type=loss_type,
        importance_sampling_level=level,
        beta=0.04,
        epsilon_high=1.3 if loss_type == "cispo" else None,
        use_bias_correction_kl=not detached,
    )
    out = grpo_loss(new, old, ref, adv, mask, **kw)
    fd = _fd(
        lambda x: grpo_loss(x, old + (x - new) * detached, ref, adv, mask, **kw).loss,
        new,
    )
    np.testing.assert_allclose(out.grad, fd * mask, rtol=0, atol=1e-8)
