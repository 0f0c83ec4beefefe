"""dpo_grpo.torch_ops.readable: the dozen-line torch losses equal the NumPy reference
and the TRL-exact torch loss."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dpo_grpo import torch_ops  # noqa: E402
from dpo_grpo.reference import dpo as ref_dpo  # noqa: E402
from dpo_grpo.reference import grpo as ref_grpo  # noqa: E402
from dpo_grpo.torch_ops import readable  # noqa: E402
from testing_support import grpo_batch  # noqa: E402


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("epsilon, beta", [(0.2, 0.04), (0.1, 0.0), (0.3, 0.5)])
def test_readable_grpo_equals_reference_and_trl_exact(seed, epsilon, beta):
    new, old, ref, adv, mask = grpo_batch(seed, 5, 7, garbage_padding=True)
    loss_np, grad_np = ref_grpo.grpo_loss(
        new, old, ref, adv, mask, epsilon=epsilon, beta=beta
    )
    t = {
        k: torch.tensor(x)
        for k, x in dict(old=old, ref=ref, adv=adv, mask=mask).items()
    }
    new_t = torch.tensor(new, requires_grad=True)
    loss = readable.grpo_loss(
        new_t, t["old"], t["ref"], t["adv"], t["mask"], epsilon=epsilon, beta=beta
    )
    loss.backward()
    assert loss.item() == pytest.approx(loss_np, rel=1e-12)
    np.testing.assert_allclose(new_t.grad.numpy(), grad_np, rtol=1e-10, atol=1e-14)
    exact = torch_ops.grpo_loss(
        torch.tensor(new),
        t["old"],
        t["ref"],
        t["adv"],
        t["mask"],
        epsilon=epsilon,
        beta=beta,
        loss_type="grpo",
    )
    assert exact.loss.item() == pytest.approx(loss.item(), rel=1e-12)


def test_readable_dpo_equals_reference_and_exact():
    logps = np.random.default_rng(0).normal(-20, 5, size=(4, 6))
    loss_np, _ = ref_dpo.dpo_loss(*logps, beta=0.1)
    pc = torch.tensor(logps[0], requires_grad=True)
    loss = readable.dpo_loss(pc, *(torch.tensor(x) for x in logps[1:]), beta=0.1)
    loss.backward()
    assert loss.item() == pytest.approx(loss_np, rel=1e-13)
    exact = torch_ops.dpo_loss(*(torch.tensor(x) for x in logps), beta=0.1)
    assert exact.loss.item() == pytest.approx(loss_np, rel=1e-13)
    # d loss / d π_w = -β σ(-z) / P
    z = 0.1 * ((logps[0] - logps[1]) - (logps[2] - logps[3]))
    np.testing.assert_allclose(
        pc.grad.numpy(), -0.1 * ref_dpo.sigmoid(-z) / 6, rtol=1e-12
    )


def test_readable_losses_reject_arrays_with_a_clear_message():
    with pytest.raises(TypeError, match="torch tensors"):
        readable.dpo_loss([1.0], [0.0], [0.0], [0.0])
    with pytest.raises(ValueError, match="first dimension"):
        readable.grpo_loss(
            torch.zeros(2, 3),
            torch.zeros(3, 3),
            torch.zeros(2, 3),
            torch.zeros(2),
            torch.ones(2, 3),
        )
