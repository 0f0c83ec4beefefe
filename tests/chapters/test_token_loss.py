"""dpo_grpo.chapters.token_loss: step 6 (aggregation per loss type, the engine
correction, masks from token roles)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dpo_grpo as dg
import dpo_grpo.trl_exact.grpo  # noqa: F401  (dg.trl_exact.grpo.LOSS_TYPES)
from dpo_grpo.chapters import rollout, token_loss
from dpo_grpo.trl_exact.grpo import grpo_loss
from testing_support import toy_rollout


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from(dg.trl_exact.grpo.LOSS_TYPES),
    st.sampled_from([0.0, 0.04]),
)
def test_aggregate_matches_grpo_loss(seed, loss_type, beta):
    rng = np.random.default_rng(seed)
    b, t = 4, 6
    lengths = rng.integers(1, t + 1, b)
    mask = (np.arange(t)[None] < lengths[:, None]).astype(float)
    old = np.log(rng.uniform(0.1, 0.9, (b, t)))
    new = old + rng.normal(0, 0.3, (b, t))
    ref = old + rng.normal(0, 0.2, (b, t))
    out = grpo_loss(
        new,
        old,
        ref,
        rng.normal(size=b),
        mask,
        beta=beta,
        loss_type=loss_type,
        max_completion_length=t + 2,
    )
    got = token_loss.aggregate(
        out.per_token_loss, mask, loss_type, max_completion_length=t + 2
    )
    assert abs(got - out.loss) < 1e-12


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("loss_type", dg.trl_exact.grpo.LOSS_TYPES)
@pytest.mark.parametrize("wshape", ["token", "sequence"])
def test_loss_and_grad_with_engine_weights(level, loss_type, wshape):
    th, ro = toy_rollout(engine_logit_noise=0.4)
    rng = np.random.default_rng(1)
    new = ro.old_logps + rng.normal(0, 0.2, ro.old_logps.shape)
    ref = ro.old_logps + rng.normal(0, 0.2, ro.old_logps.shape)
    adv = rng.normal(size=8)
    opts = dict(
        beta=0.04,
        loss_type=loss_type,
        importance_sampling_level=level,
        use_bias_correction_kl=True,
    )
    mode = "token_truncate" if wshape == "token" else "sequence_truncate"
    w = rollout.engine_importance_weights(
        ro.old_logps, ro.sampling_logps, ro.mask, mode=mode
    )
    if loss_type == "vespo":  # TRL folds engine ratios into VESPO's weight: refused
        with pytest.raises(ValueError, match="vespo"):
            token_loss.loss_and_grad(new, ro, adv, ref, engine_weights=w, **opts)
        return
    out = token_loss.loss_and_grad(new, ro, adv, ref, engine_weights=w, **opts)
    plain = token_loss.loss_and_grad(new, ro, adv, ref, **opts)
    ones = token_loss.loss_and_grad(
        new, ro, adv, ref, engine_weights=np.ones((8, 1)), **opts
    )
    assert abs(ones.loss - plain.loss) < 1e-12 and np.allclose(
        ones.grad, plain.grad, atol=1e-14
    )
    assert abs(out.loss - plain.loss) > 1e-6

    # cispo's weight min(rho, eps_max) is detached: move old with new so that it stays
    # fixed
    def f(x):
        shifted = (
            ro._replace(old_logps=ro.old_logps + (x - new))
            if loss_type == "cispo"
            else ro
        )
        return token_loss.loss_and_grad(
            x, shifted, adv, ref, engine_weights=w, **opts
        ).loss

    if loss_type == "cispo":
        opts["use_bias_correction_kl"] = (
            False  # (the bias-corrected KL differentiates the ratio, which f freezes)
        )
        out = token_loss.loss_and_grad(new, ro, adv, ref, engine_weights=w, **opts)
    assert dg.max_abs_error(out.grad, dg.finite_difference(f, new, h=1e-6)) < 1e-8
    assert np.all(out.grad[ro.mask == 0] == 0)


def test_loss_and_grad_validation():
    _, ro = toy_rollout()
    with pytest.raises(TypeError, match="rollout"):
        token_loss.loss_and_grad(ro.old_logps, "rollout", np.zeros(8))
    with pytest.raises(ValueError, match="engine_weights"):
        token_loss.loss_and_grad(
            ro.old_logps,
            ro,
            np.zeros(8),
            None,
            beta=0.0,
            engine_weights=np.ones((8, 2)),
        )
    with pytest.raises(ValueError, match="beta == 0"):
        token_loss.loss_and_grad(ro.old_logps, ro, np.zeros(8), None, beta=0.04)


def test_masks_from_roles():
    P, M, T, D = token_loss.PROMPT, token_loss.MODEL, token_loss.TOOL, token_loss.PAD
    roles = np.array([[P, P, M, M, T, T, M, D], [P, M, M, M, M, D, D, D]])
    m = token_loss.masks_from_roles(roles)
    assert m["loss"].sum(1).tolist() == [3, 4]
    assert m["completion"].sum(1).tolist() == [5, 4] and m["attention"].sum(
        1
    ).tolist() == [7, 5]
    np.testing.assert_array_equal(m["loss"], m["completion"] * m["tool"])
    with pytest.raises(ValueError, match="roles"):
        token_loss.masks_from_roles(np.array([[5]]))


def test_roles_from_text_spells_the_roles_of_masks_from_roles():
    roles = token_loss.roles_from_text(["PPMMTTM.", "PPMMMM.."])
    assert roles.tolist() == [
        [token_loss.PROMPT] * 2
        + [token_loss.MODEL] * 2
        + [token_loss.TOOL] * 2
        + [token_loss.MODEL, token_loss.PAD],
        [token_loss.PROMPT] * 2 + [token_loss.MODEL] * 4 + [token_loss.PAD] * 2,
    ]
    assert token_loss.masks_from_roles(roles)["loss"].sum(1).tolist() == [3, 4]
    with pytest.raises(ValueError, match="one length"):
        token_loss.roles_from_text(["PM", "PMM"])
    with pytest.raises(ValueError, match="only P, M, T"):
        token_loss.roles_from_text(["PX"])
    with pytest.raises(ValueError, match="rows"):
        token_loss.roles_from_text([])
    with pytest.raises(TypeError, match="rows"):
        token_loss.roles_from_text([[2, 2]])
