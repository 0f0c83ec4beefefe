"""Section 10.4: the clip-fraction calibration of the small step, directions of the
variants' gradients, and the Adam demo (a constant factor on the loss leaves Adam's
steps unchanged up to eps, a change of direction does not)."""

import math

import numpy as np
import pytest

from dpo_grpo.chapters import variant_directions as D
from dpo_grpo.chapters import variants as V


def test_expected_clip_fractions_match_drawn_batches():
    d = 0.667
    want = D.expected_clip_fractions(d)
    drawn = [
        {r["name"]: r["metric"][1] for r in V.run_grpo_variants(V.toy_batch(d, s, 0.0))}
        for s in range(300)
    ]
    assert np.mean([x["GSPO"] for x in drawn]) == pytest.approx(
        want["sequence"], abs=0.04
    )
    assert np.mean([x["GRPO"] for x in drawn]) == pytest.approx(
        want["token"], abs=0.004
    )
    assert D.expected_clip_fractions(0.0) == {"token": 0.0, "sequence": 0.0}


def test_expected_token_fraction_by_hand_for_one_sign():
    # push=0: a token with A > 0 is clipped when N(0, (0.12 d)^2) > log 1.2, with A < 0
    # when < log 0.8
    d = 1.0
    b = V.toy_batch(0.0)
    sign = np.sign(V.reward_advantages(b["rewards"].reshape(-1, 1), 4).advantages)
    tail = lambda z: 0.5 * math.erfc(z / math.sqrt(2))  # noqa: E731
    per = np.where(sign > 0, tail(math.log(1.2) / 0.12), tail(-math.log(0.8) / 0.12))
    want = (per * b["lengths"]).sum() / b["lengths"].sum()
    assert D.expected_clip_fractions(d)["token"] == pytest.approx(want, rel=1e-12)


def test_calibrated_drift_gives_the_papers_ratio():
    d = D.calibrated_drift()
    f = D.expected_clip_fractions(d)
    assert f["sequence"] / f["token"] == pytest.approx(D.GSPO_CLIP_RATIO, rel=1e-6)
    # noise-only drift: GSPO clips about half, not all; a systematic push clips (almost)
    # all
    assert 0.3 < f["sequence"] < 0.6
    pushed = D.expected_clip_fractions(D.calibrated_drift(push=0.22), push=0.22)
    assert pushed["sequence"] > 0.99
    assert D.calibrated_drift(10.0) > d  # a smaller ratio needs a larger drift
    with pytest.raises(ValueError):
        D.calibrated_drift(1e-9)


def test_gradient_directions_are_scale_free_and_see_direction():
    rows = V.run_grpo_variants(V.toy_batch(0.0))
    scaled = [dict(r, grad=3.0 * r["grad"]) if r["name"] == "DAPO" else r for r in rows]
    a, b = D.gradient_directions(rows), D.gradient_directions(scaled)
    assert a["GRPO"]["cosine"] == pytest.approx(1.0) and a["GRPO"]["answer_tv"] == 0
    assert b["DAPO"]["cosine"] == pytest.approx(a["DAPO"]["cosine"])
    assert b["DAPO"]["answer_tv"] == pytest.approx(a["DAPO"]["answer_tv"])
    # Dr. GRPO re-weights answers: not parallel to GRPO
    assert a["Dr. GRPO"]["cosine"] < 0.99 and a["Dr. GRPO"]["answer_tv"] > 0.05
    shares = a["Dr. GRPO"]["answer_share"]
    assert shares.sum() == pytest.approx(1.0) and a["Dr. GRPO"][
        "token_share"
    ].sum() == pytest.approx(1.0)
    stale = D.gradient_directions(V.run_grpo_variants(V.toy_batch(1.0)))
    assert math.isnan(stale["GSPO"]["cosine"])  # no gradient, no direction
    with pytest.raises(ValueError):
        D.gradient_directions(rows, reference="nope")


def test_adam_undoes_a_constant_factor_but_not_a_direction():
    out = D.adam_scale_demo(0.27, seed=1)
    assert out["adam"]["scaled"] < 1e-3
    assert out["sgd"]["scaled"] > 0.3
    assert out["adam"]["dr_grpo"] > 0.1
    assert D.adam_scale_demo(0.27, seed=1, eps=0.0)["adam"]["scaled"] < 1e-12
    # a large eps is what breaks the invariance
    assert D.adam_scale_demo(0.27, seed=1, eps=1.0)["adam"]["scaled"] > 0.1
