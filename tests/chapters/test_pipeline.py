"""dpo_grpo.chapters.pipeline: the seven steps chained on a resumable trainer state,
checkpoint and restore."""

import numpy as np
import pytest
from dpo_grpo.chapters import pipeline
from testing_support import toy_reward_fns


def test_grpo_step_is_deterministic_and_changes_the_policy():
    a, b = pipeline.new_state(seed=5), pipeline.new_state(seed=5)
    for _ in range(4):
        la, lb = (
            pipeline.grpo_step(a, toy_reward_fns()),
            pipeline.grpo_step(b, toy_reward_fns()),
        )
    np.testing.assert_array_equal(a.theta, b.theta)
    assert la == lb and np.abs(a.theta).max() > 0
    assert a.step == 8 and a.policy_version == 4 and a.data_cursor == 8


def test_reference_cache_is_used():
    st_ = pipeline.new_state()
    cache = {}
    pipeline.grpo_step(st_, toy_reward_fns(), ref_cache=cache)
    assert list(cache) == [("ref-v0", 0)]


def test_checkpoint_resume_is_exact_and_weights_only_is_not():
    fns = toy_reward_fns()
    straight, resumed = pipeline.new_state(seed=3), pipeline.new_state(seed=3)
    for _ in range(6):
        pipeline.grpo_step(straight, fns)
    for _ in range(3):
        pipeline.grpo_step(resumed, fns)
    ckpt = pipeline.checkpoint(resumed)
    assert pipeline.missing_checkpoint_keys(ckpt) == []
    again = pipeline.restore(ckpt)
    for _ in range(3):
        pipeline.grpo_step(again, fns)
    np.testing.assert_array_equal(again.theta, straight.theta)

    weights_only = {"policy": ckpt["policy"]}
    assert pipeline.missing_checkpoint_keys(weights_only) == [
        k for k in pipeline.CHECKPOINT_KEYS if k != "policy"
    ]
    with pytest.raises(ValueError, match="optimizer"):
        pipeline.restore(weights_only)
    naive = pipeline.restore(weights_only, strict=False)
    # the anchor moved to the loaded actor
    np.testing.assert_array_equal(naive.theta_ref, ckpt["policy"])
    for _ in range(3):
        pipeline.grpo_step(naive, fns)
    assert np.abs(naive.theta - straight.theta).max() > 1e-3
    for key in [
        k for k in pipeline.CHECKPOINT_KEYS if k != "policy"
    ]:  # every single part matters
        partial = {k: v for k, v in ckpt.items() if k != key}
        st_ = pipeline.restore(partial, strict=False)
        for _ in range(3):
            pipeline.grpo_step(st_, fns)
        if (
            key != "reward_version"
        ):  # a label only: the toy reward functions are passed in explicitly
            assert np.abs(st_.theta - straight.theta).max() > 1e-6, key


def test_validation_errors():
    with pytest.raises(TypeError, match="state"):
        pipeline.grpo_step({}, toy_reward_fns())
    with pytest.raises(TypeError, match="ckpt"):
        pipeline.missing_checkpoint_keys([])


def test_data_flow_text_stays_inside_its_box():
    """Issue #28 item 5: box 2's 'frozen snapshot, G per prompt' ran past its box."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    fig, ax = plt.subplots(figsize=(12, 5))
    pipeline.plot_data_flow(ax)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [
        p.get_window_extent(renderer)
        for p in ax.patches
        if isinstance(p, FancyBboxPatch)
    ]
    assert len(boxes) == len(pipeline.FLOW_STEPS)
    seen = 0
    for text in ax.texts:
        bb = text.get_window_extent(renderer)
        cx, cy = (bb.x0 + bb.x1) / 2, (bb.y0 + bb.y1) / 2
        for box in boxes:
            if box.x0 < cx < box.x1 and box.y0 < cy < box.y1:
                seen += 1
                margin = 3.0  # pixels at the default dpi
                assert bb.x0 >= box.x0 + margin and bb.x1 <= box.x1 - margin, (
                    f"{text.get_text()!r} overflows its box"
                )
                assert bb.y0 >= box.y0 and bb.y1 <= box.y1, text.get_text()
    plt.close(fig)
    assert seen == 2 * len(pipeline.FLOW_STEPS)  # a title and a line per box
