"""dpo_grpo.reference.bandit: the article's trajectory (seed 7) and its 5-configuration
x 10-seed table."""

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.reference import examples as ex


def test_seed7_snapshots():
    snaps = dg.train_group_bandit()
    assert [s for s, _ in snaps] == [1, 20, 40, 80]
    expected = [
        [0.2288, 0.2494, 0.2883, 0.2335],
        [0.0210, 0.0346, 0.9179, 0.0265],
        [0.0048, 0.0064, 0.9833, 0.0055],
        [0.0026, 0.0035, 0.9906, 0.0033],
    ]
    np.testing.assert_array_equal(np.round([p for _, p in snaps], 4), expected)
    # a shorter run reports only the marks it reaches, then its last step
    short = dg.train_group_bandit(steps=25)
    assert [s for s, _ in short] == [1, 20, 25]
    # step 20 does not depend on the run's length
    np.testing.assert_array_equal(short[1][1], snaps[1][1])
    # the seed table reads the requested action: seed 7's final probabilities are the
    # snapshot's last row
    row = dg.bandit_seed_table({"seed 7": {}}, seeds=[7], best_action=0)["seed 7"]
    assert row["values"] == [snaps[-1][1][0]] and round(row["mean"], 4) == 0.0026


@pytest.fixture(scope="module")
def table():
    return dg.bandit_seed_table(ex.BANDIT_CONFIGS, seeds=range(10))


@pytest.mark.parametrize(
    "name, mean, lo, hi",
    [
        ("G=32 (original)", 0.990830, 0.987677, 0.992312),
        ("G=2", 0.950928, 0.938407, 0.962952),
        ("all rewards 1", 0.25, 0.25, 0.25),
        ("best reward 0.31", 0.987225, 0.983949, 0.989418),
        ("beta=0.5", 0.877653, 0.864133, 0.901262),
    ],
)
def test_seed_table(table, name, mean, lo, hi):
    row = table[name]
    assert (round(row["mean"], 6), round(row["min"], 6), round(row["max"], 6)) == (
        mean,
        lo,
        hi,
    )


def test_all_equal_rewards_never_move_from_uniform(table):
    assert table["all rewards 1"]["values"] == [0.25] * 10


def test_kl_pulls_back_when_started_away_from_reference():
    # equal rewards -> zero advantages; from the uniform reference nothing moves
    # (above), but the KL term alone moves a policy that is not at the reference: run
    # one inner step by hand from skewed logits
    logits = np.array([2.0, 0.0, 0.0, 0.0])
    logp = dg.log_softmax(logits)
    acts = np.array([0, 0, 1, 2])
    out = dg.trl_exact.grpo_loss(
        logp[acts, None],
        logp[acts, None],
        np.log(np.full(4, 0.25))[acts, None],
        np.zeros(4),
        np.ones((4, 1)),
        beta=0.5,
    )
    # zero advantages: only the k3 term acts, d k3 / d new = 1 - q / p(a), weighted by
    # beta / (B * 1 token)
    p = np.exp(logp)
    np.testing.assert_allclose(
        out.grad[:, 0], 0.5 / 4 * (1 - 0.25 / p[acts]), rtol=1e-13
    )
    # the step on the logits lowers the over-weighted action 0 and moves the policy
    # towards the reference
    step = out.grad[:, 0] @ (np.eye(4)[acts] - p)
    after = dg.softmax(logits - step)
    assert after[0] < p[0] and dg.exact_kl(after, np.full(4, 0.25)) < dg.exact_kl(
        p, np.full(4, 0.25)
    )


def test_deterministic():
    a = dg.bandit_trajectory(steps=30, seed=3)
    b = dg.bandit_trajectory(steps=30, seed=3)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (31, 4)


def test_a_run_extended_in_pieces_is_the_one_shot_run():
    run = dg.BanditRun(group_size=8, seed=11, beta=0.1)
    pieces = [
        run.trajectory(5),
        run.trajectory(17),
        run.trajectory(3),
        run.trajectory(60),
    ]
    assert run.steps_run == 60
    whole = dg.bandit_trajectory(steps=60, group_size=8, seed=11, beta=0.1)
    for piece in pieces:
        # bit for bit, not approximately
        np.testing.assert_array_equal(piece, whole[: len(piece)])
    assert dg.BanditRun(group_size=8, seed=11, beta=0.1).key == run.key
    assert dg.BanditRun(group_size=8, seed=12, beta=0.1).key != run.key
    with pytest.raises(ValueError, match="steps"):
        run.trajectory(0)


def test_invalid():
    with pytest.raises(ValueError, match="group_size"):
        dg.train_group_bandit(group_size=1)
    with pytest.raises(ValueError, match="lr"):
        dg.train_group_bandit(lr=0)
    with pytest.raises(ValueError, match="epsilon"):
        dg.train_group_bandit(epsilon=1.5)
    with pytest.raises(ValueError, match="reward_table"):
        dg.train_group_bandit(reward_table=[1.0, np.nan, 0.0, 0.0])
    with pytest.raises(TypeError, match="configs"):
        dg.bandit_seed_table([])
