"""dpo_grpo.reference.grpo: the clipped objective's platform values and its gradient
with delta."""

import dpo_grpo as dg
import numpy as np


def test_clipped_objective_platform_values():
    eps = 0.2
    np.testing.assert_allclose(dg.clipped_objective([1.5, 2.0], 1.0, eps), [1.2, 1.2])
    np.testing.assert_allclose(
        dg.clipped_objective([0.5, 0.1], -1.0, eps), [-0.8, -0.8]
    )
    # wrong direction: not clipped
    np.testing.assert_allclose(dg.clipped_objective([1.5], -1.0, eps), [-1.5])
    # two-sided cap
    np.testing.assert_allclose(
        dg.clipped_objective([3.0], -1.0, eps, delta=2.0), [-2.0]
    )


def test_clipped_objective_grad_with_delta():
    # A < 0: the unclipped branch is min(rho, delta) A, flat (gradient 0) once rho >
    # delta
    grad = dg.clipped_objective_grad([0.5, 1.5, 2.5], -1.0, epsilon=0.2, delta=2.0)
    # low platform, wrong-direction slope, capped
    np.testing.assert_array_equal(grad, [0.0, -1.0, 0.0])
    np.testing.assert_array_equal(
        dg.clipped_objective_grad([0.5, 1.5, 2.5], -1.0, epsilon=0.2), [0.0, -1.0, -1.0]
    )
    # A > 0: the upper clip at 1 + eps acts before delta does
    np.testing.assert_array_equal(
        dg.clipped_objective_grad([0.5, 1.1, 2.5], 2.0, epsilon=0.2, delta=2.0),
        [2.0, 2.0, 0.0],
    )
