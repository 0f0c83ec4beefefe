"""dpo_grpo.chapters.gradcheck: central differences are exact on quadratics and reject
bad arguments."""

import numpy as np
import pytest

import dpo_grpo as dg


def test_quadratic():
    a = np.array([[2.0, 0.5], [0.5, 1.0]])
    x = np.array([0.3, -1.2])
    fd = dg.finite_difference(lambda v: 0.5 * v @ a @ v, x)
    assert dg.max_abs_error(fd, a @ x) < 1e-9


def test_detects_a_wrong_gradient():
    x = np.array([1.0, 2.0])
    fd = dg.finite_difference(lambda v: np.sum(v**3), x)
    assert dg.max_abs_error(fd, 2 * x) > 1  # 2x is not the derivative of x^3


def test_invalid():
    with pytest.raises(TypeError, match="fn"):
        dg.finite_difference(3, [1.0])
    with pytest.raises(ValueError, match="h"):
        dg.finite_difference(np.sum, [1.0], h=0)
