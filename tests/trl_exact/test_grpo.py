"""dpo_grpo.trl_exact.grpo: the article's clipped-objective numbers, analytic gradients
vs finite differences for every option, padding that cannot leak, the clip platforms,
and input validation."""

import itertools

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex
from hypothesis import given
from hypothesis import strategies as st
from testing_support import grpo_batch


def test_article_example():
    out = dg.trl_exact.grpo_loss(**ex.grpo_token_example(), epsilon=0.2, beta=0.04)
    np.testing.assert_array_equal(
        np.round(out.ratio[:, 0], 4), [1.2840, 1.1052, 0.7788, 0.9048]
    )
    assert round(out.per_token_kl.mean(), 6) == 0.018550
    assert round(out.loss, 4) == 0.1626
    # no answer of the example sits on a platform: 0 and 2 are wrong-direction, 1 and 3
    # inside
    regions = dg.clip_region(out.ratio[:, 0], ex.grpo_token_example()["advantages"])
    assert regions.tolist() == [
        "wrong_direction",
        "inside",
        "wrong_direction",
        "inside",
    ]
    assert out.metrics["clip_ratio/region_mean"] == 0.0


OPTIONS = [
    dict(
        loss_type=lt,
        importance_sampling_level=lvl,
        beta=beta,
        use_bias_correction_kl=bc,
        epsilon_high=eh,
    )
    for lt, lvl, beta, bc, eh in itertools.product(
        ("grpo", "bnpo", "dr_grpo", "dapo"),
        ("token", "sequence"),
        (0.0, 0.04),
        (False, True),
        (None, 0.28),
    )
]


@pytest.mark.parametrize(
    "opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items())
)
@pytest.mark.parametrize("adv_2d", [False, True])
def test_gradient_matches_finite_differences(opts, adv_2d):
    new, old, ref, adv, mask = grpo_batch(adv_2d=adv_2d)
    out = dg.trl_exact.grpo_loss(new, old, ref, adv, mask, **opts)

    def f(x):
        return dg.trl_exact.grpo_loss(x, old, ref, adv, mask, **opts).loss

    assert dg.max_abs_error(out.grad, dg.finite_difference(f, new, h=1e-6)) < 1e-8
    assert np.all(out.grad[mask == 0] == 0)


def test_loss_types_on_a_ragged_batch():
    new, old, ref, adv, mask = grpo_batch()
    per_tok = dg.trl_exact.grpo_loss(new, old, ref, adv, mask).per_token_loss
    b, t = mask.shape
    expect = {
        "grpo": np.mean(per_tok.sum(1) / mask.sum(1)),
        "bnpo": per_tok.sum() / mask.sum(),
        "dr_grpo": per_tok.sum() / (b * t),
        "dapo": per_tok.sum() / mask.sum(),
    }
    for lt, value in expect.items():
        assert dg.trl_exact.grpo_loss(
            new, old, ref, adv, mask, loss_type=lt
        ).loss == pytest.approx(value, rel=1e-13)
    assert dg.trl_exact.grpo_loss(
        new, old, ref, adv, mask, loss_type="grpo", gradient_accumulation_steps=4
    ).loss == pytest.approx(expect["grpo"] / 4, rel=1e-13)
    # dr_grpo divides by B x max_completion_length (not the batch's width T)
    assert dg.trl_exact.grpo_loss(
        new, old, ref, adv, mask, loss_type="dr_grpo", max_completion_length=10
    ).loss == pytest.approx(per_tok.sum() / (b * 10), rel=1e-13)
    # dapo divides by num_items_in_batch / num_processes * gradient_accumulation_steps /
    # steps_per_generation
    dapo = dict(
        loss_type="dapo",
        num_items_in_batch=40,
        num_processes=4,
        gradient_accumulation_steps=3,
        steps_per_generation=2,
    )
    assert dg.trl_exact.grpo_loss(
        new, old, ref, adv, mask, **dapo
    ).loss == pytest.approx(per_tok.sum() / (40 / 4 * 3 / 2), rel=1e-13)


def test_sequence_level_ratio_is_geometric_mean():
    old = np.zeros((2, 2))
    new = np.log(np.array([[2.0, 0.5], [2.0, 2.0]]))
    out = dg.trl_exact.grpo_loss(
        new,
        old,
        None,
        [1.0, 1.0],
        np.ones((2, 2)),
        beta=0.0,
        importance_sampling_level="sequence",
    )
    # the sequence ratio of row 2 would be 4
    np.testing.assert_allclose(out.ratio, [[1.0, 1.0], [2.0, 2.0]])


def test_padding_garbage_cannot_leak():
    new, old, ref, adv, mask = grpo_batch(seed=3)
    clean = dg.trl_exact.grpo_loss(new, old, ref, adv, mask)
    dirty = [x.copy() for x in (new, old, ref)]
    for x, junk in zip(dirty, (np.nan, np.inf, -np.inf)):
        x[mask == 0] = junk
    out = dg.trl_exact.grpo_loss(*dirty, adv, mask)
    assert out.loss == clean.loss
    np.testing.assert_array_equal(out.grad, clean.grad)


def test_equal_sequences_with_padding_nan():
    # the article's mask check: same ratio everywhere, advantages +1/-1, NaN in padding
    # -> loss exactly 0
    mask = np.array([[1, 0, 0], [1, 1, 1]])
    old = np.log(np.full((2, 3), 0.2))
    new = old + 0.1
    new[mask == 0] = np.nan
    assert (
        abs(dg.trl_exact.grpo_loss(new, old, old, [1.0, -1.0], mask, beta=0).loss)
        < 1e-15
    )


def test_full_softmax_surrogate_gradient():
    s = ex.surrogate_gradient_example()
    acts = s["actions"]

    def loss(z):
        logp = dg.log_softmax(z)
        return dg.trl_exact.grpo_loss(
            logp[acts, None],
            np.log(s["old_probs"])[acts, None],
            np.log(s["ref_probs"])[acts, None],
            s["advantages"],
            np.ones((4, 1)),
            beta=s["beta"],
        ).loss

    z = np.log(s["new_probs"])
    out = dg.trl_exact.grpo_loss(
        np.log(s["new_probs"])[acts, None],
        np.log(s["old_probs"])[acts, None],
        np.log(s["ref_probs"])[acts, None],
        s["advantages"],
        np.ones((4, 1)),
        beta=s["beta"],
    )
    analytic = out.grad[:, 0] @ (np.eye(4)[acts] - s["new_probs"])
    assert dg.max_abs_error(analytic, dg.finite_difference(loss, z)) < 1e-9
    regions = dg.clip_region(s["new_probs"] / s["old_probs"], s["advantages"]).tolist()
    # both platforms (A > 0, rho > 1.2 and A < 0, rho < 0.8), one wrong-direction token
    # and one inside
    assert regions == ["platform", "platform", "wrong_direction", "inside"]


@given(
    st.floats(0.05, 3.0),
    st.floats(-3, 3).filter(lambda a: abs(a) > 1e-3),
    st.floats(0.05, 0.5),
)
def test_clip_platforms_exactly_where_the_article_says(rho, a, eps):
    grad = dg.clipped_objective_grad(rho, a, epsilon=eps)
    on_platform = (a > 0 and rho > 1 + eps) or (a < 0 and rho < 1 - eps)
    assert (grad == 0) == on_platform
    if not on_platform:
        assert grad == pytest.approx(a)
    # the GRPO loss gradient agrees: d loss / d log rho = -rho * d objective / d rho
    out = dg.trl_exact.grpo_loss(
        [[np.log(rho)]], [[0.0]], None, [a], [[1]], epsilon=eps, beta=0.0
    )
    assert out.grad[0, 0] == pytest.approx(-rho * grad, abs=1e-12)


def test_metrics_count_clipped_tokens():
    old = np.zeros((2, 3))
    new = np.log(np.array([[1.5, 1.0, 0.5], [0.5, 1.0, 1.0]]))
    adv = np.array([1.0, -1.0])
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    m = dg.trl_exact.grpo_loss(new, old, None, adv, mask, beta=0.0).metrics
    assert m["clip_ratio/high_mean"] == pytest.approx(1 / 5)
    assert m["clip_ratio/low_mean"] == pytest.approx(1 / 5)
    assert m["clip_ratio/region_mean"] == pytest.approx(2 / 5)
    assert m["clip_ratio/low_min"] == 0.0 and m["clip_ratio/high_max"] == pytest.approx(
        1 / 3
    )
    assert "kl" not in m


def test_on_policy_ratio_is_one_and_nothing_is_clipped():
    new, _, ref, adv, mask = grpo_batch()
    out = dg.trl_exact.grpo_loss(new, new, ref, adv, mask)
    assert np.all(out.ratio == 1.0) and out.metrics["clip_ratio/region_mean"] == 0.0


def _ok():
    new, old, ref, adv, mask = grpo_batch()
    return dict(new_logps=new, old_logps=old, ref_logps=ref, advantages=adv, mask=mask)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(mask=np.zeros((5, 6))), "no valid token"),
        (dict(mask=np.full((5, 6), 2.0)), "only 0 and 1"),
        (dict(mask=np.ones((5, 5))), "mask must have shape"),
        (dict(old_logps=np.zeros((5, 5))), "old_logps must have the same shape"),
        (dict(advantages=np.zeros(4)), "advantages must have shape"),
        (dict(advantages=np.array([np.nan, 0, 0, 0, 0])), "advantages must be finite"),
        (dict(new_logps=np.full((5, 6), np.nan)), "new_logps must be finite"),
        (dict(new_logps=np.zeros((0, 6))), "empty"),
        (dict(new_logps=np.zeros(6)), "2-D"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=1.0), "epsilon"),
        (dict(epsilon_high=-0.1), "epsilon_high"),
        (dict(beta=-0.1), "beta"),
        (dict(ref_logps=None), "ref_logps may be None only when beta == 0"),
        (dict(loss_type="ppo"), "loss_type"),
        (dict(importance_sampling_level="batch"), "importance_sampling_level"),
        (dict(delta=0.9), "delta"),
        (dict(max_completion_length=3), "max_completion_length"),
        (dict(num_items_in_batch=0), "num_items_in_batch"),
        (dict(gradient_accumulation_steps=0), "gradient_accumulation_steps"),
        (dict(new_logps=np.full((5, 6), 800.0)), "overflow"),
        (
            dict(
                new_logps=np.full((5, 6), 400.0),
                old_logps=np.zeros((5, 6)),
                ref_logps=np.full((5, 6), 800.0),
                use_bias_correction_kl=True,
            ),
            "overflow",
        ),
    ],
)
def test_invalid_inputs(change, match):
    kwargs = _ok() | change
    with pytest.raises(ValueError, match=match):
        dg.trl_exact.grpo_loss(**kwargs)


def test_type_errors():
    with pytest.raises(TypeError, match="use_bias_correction_kl"):
        dg.trl_exact.grpo_loss(**_ok(), use_bias_correction_kl="yes")
    with pytest.raises(TypeError, match="gradient_accumulation_steps"):
        dg.trl_exact.grpo_loss(**_ok(), gradient_accumulation_steps=1.5)


def test_onpolicy_bias_correction_follows_the_reverse_kl_gradient():
    # On-policy (new == old) the ratio is 1 but differentiable: TRL's default
    # use_bias_correction_kl=True makes the k3 term follow grad KL(pi_theta || pi_ref)
    # (k2's gradient), the paper's bare k3 follows p - q = grad KL(pi_ref || pi_theta).
    p, q = np.array([0.7, 0.2, 0.1]), np.array([0.2, 0.3, 0.5])
    actions = np.repeat(np.arange(3), [7, 2, 1])  # empirical distribution = p
    col = lambda probs: np.log(probs)[actions, None]
    score = np.eye(3)[actions] - p
    grads = {}
    for corrected in (False, True):
        res = dg.trl_exact.grpo_loss(
            col(p),
            col(p),
            col(q),
            np.zeros(10),
            np.ones((10, 1)),
            beta=1.0,
            loss_type="bnpo",
            use_bias_correction_kl=corrected,
        )
        grads[corrected] = res.grad[:, 0] @ score
    np.testing.assert_allclose(grads[False], p - q, atol=1e-12)
    np.testing.assert_allclose(grads[True], dg.kl_grad_logits(np.log(p), q), atol=1e-12)
    np.testing.assert_allclose(grads[True], [0.4325, -0.2081, -0.2244], atol=5e-5)


@pytest.mark.parametrize("lam", [0.0, -1.0])
def test_vespo_accepts_what_trl_accepts(lam):
    """TRL 1.16 does not check vespo_lambda_*: its weight floors lambda at
    float32(1e-4), so lambda = 0 (or below) gives the loss of lambda = 1e-4, finite."""
    batch = ex.random_grpo_batch(seed=3, batch=6, length=5)
    kw = dict(loss_type="vespo", beta=0.0)
    got = dg.trl_exact.grpo_loss(
        **batch, vespo_lambda_pos=lam, vespo_lambda_neg=lam, **kw
    )
    floor = float(np.float32(1e-4))
    want = dg.trl_exact.grpo_loss(
        **batch, vespo_lambda_pos=floor, vespo_lambda_neg=floor, **kw
    )
    assert np.isfinite(got.loss) and got.loss == pytest.approx(want.loss, rel=1e-12)


def test_a_loss_type_without_an_implementation_raises_instead_of_computing_another(
    monkeypatch,
):
    # a name added to LOSS_TYPES but to no dispatch used to fall into the catch-all
    # branches (VESPO's policy term with DAPO's normaliser); TRL's dispatch raises
    import dpo_grpo.trl_exact.grpo as trl_grpo

    monkeypatch.setattr(trl_grpo, "LOSS_TYPES", trl_grpo.LOSS_TYPES + ("made_up",))
    lp = np.log(np.full((2, 3), 0.3))
    with pytest.raises(ValueError, match="made_up"):
        trl_grpo.grpo_loss(
            lp,
            lp,
            None,
            np.array([1.0, -1.0]),
            np.ones((2, 3)),
            loss_type="made_up",
            beta=0.0,
        )


def test_scale_rewards_without_an_implementation_raises(monkeypatch):
    import dpo_grpo.trl_exact.advantages as trl_adv

    monkeypatch.setattr(trl_adv, "SCALE_REWARDS", trl_adv.SCALE_REWARDS + ("made_up",))
    with pytest.raises(ValueError, match="made_up"):
        trl_adv.reward_advantages(np.array([[1.0], [0.0]]), 2, scale_rewards="made_up")
