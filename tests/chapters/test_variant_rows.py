"""Chapter 10's tables of variants (:mod:`dpo_grpo.chapters.variant_rows`): each row's
"what it changes" shows in the reader's language through the tables layer, and what the
DPO rows and the parity appendix say TRL 1.16.0 computes is what its DPOTrainer
computes."""

import html
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dpo_grpo import tables
from dpo_grpo.chapters import variant_rows as R
from dpo_grpo.i18n import needs_translation
from dpo_grpo.trl_exact.dpo import DPO_LOSS_TYPES, LABEL_SMOOTHING_LOSS_TYPES

BOOK = Path(__file__).resolve().parents[2] / "book"

HAN = re.compile(r"[\u4e00-\u9fff]")
ROWS = R.GRPO_VARIANTS + R.DPO_VARIANTS + R.PREFERENCE_TRAINERS


def shown(var) -> str:
    """The "what it changes" cell as chapter 10's tables render it."""
    html = tables.html_table([[var.name, var.changes]], ["variant", "what it changes"])
    return re.findall(r"<td[^>]*>(.*?)</td>", html)[1]


def test_changes_in_english_and_chinese(monkeypatch):
    monkeypatch.delenv("DPO_GRPO_LANG", raising=False)
    for var in ROWS:
        assert shown(var) == html.escape(var.changes)
    monkeypatch.setenv("DPO_GRPO_LANG", "zh")
    words = [var for var in ROWS if needs_translation(var.changes)]
    assert len(words) >= 25
    untranslated = [var.name for var in words if not HAN.search(shown(var))]
    assert not untranslated, untranslated
    # TRL option names stay as written
    dapo = next(var for var in ROWS if var.name == "DAPO")
    assert "clip-higher" in shown(dapo)
    kto = next(var for var in R.PREFERENCE_TRAINERS if var.name == "KTO")
    kto_html = tables.html_table([[kto.extra]], ["trainer"])
    assert "trl.KTOTrainer" in kto_html and HAN.search(kto_html)


def test_config_code_prints_the_config():
    dr = next(var for var in R.GRPO_VARIANTS if var.name == "Dr. GRPO")
    assert R.config_code(dr) == (
        'GRPOConfig(loss_type="dr_grpo", scale_rewards="none", beta=0.0)'
    )


# --------------------------------------------------------------------------------------
# What the DPO rows and the parity appendix say TRL does, against TRL 1.16.0 itself
# --------------------------------------------------------------------------------------

#: sequence log-probs of four pairs: policy chosen, policy rejected, ref chosen, ref
#: rejected; the policy's and the reference's margins are ranked differently
PAIRS = (
    [-12.0, -20.0, -30.0, -8.0],
    [-14.0, -18.5, -45.0, -9.0],
    [-12.5, -19.0, -33.0, -10.0],
    [-13.0, -19.0, -40.0, -7.5],
)


@pytest.fixture(scope="module")
def trl_loss(tmp_path_factory):
    """TRL 1.16.0's own ``DPOTrainer._compute_loss`` as a function
    ``(loss_type, label_smoothing, beta) -> loss`` on :data:`PAIRS`: a real trainer
    (tiny random Qwen2, no download), its ``loss_types`` and ``label_smoothing`` set
    per call, a stub policy whose one completion token carries each sequence log-prob,
    the reference log-probs given as precomputed."""
    torch = pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    from datasets import Dataset

    from dpo_grpo.lab import hf

    path = tmp_path_factory.mktemp("tiny-qwen2")
    model, tok = hf.tiny_random_model(0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    args = trl.DPOConfig(
        output_dir=str(path / "out"),
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        **R.CPU_CONFIG,
    )
    data = Dataset.from_dict({"prompt": ["1+2="], "chosen": ["3"], "rejected": ["4"]})
    trainer = trl.DPOTrainer(
        model=str(path), args=args, train_dataset=data, processing_class=tok
    )
    trainer.precompute_ref_logps = True
    pc, pr, rc, rr = (torch.tensor(x, dtype=torch.float64) for x in PAIRS)
    n = 2 * len(pc)
    logps = torch.cat([pc, pr])[:, None]  # (2P, 1): chosen rows, then rejected

    def policy(labels=None, fused_lm_head=False, **kwargs):
        assert fused_lm_head and labels.shape == (n, 2)
        return SimpleNamespace(
            log_probs=logps,
            entropy=torch.ones_like(logps),
            mean_logits=torch.zeros_like(logps),
            is_top1=torch.zeros(logps.shape, dtype=torch.bool),
        )

    inputs = {
        "input_ids": torch.full((n, 2), 7, dtype=torch.long),
        "attention_mask": torch.ones((n, 2), dtype=torch.long),
        "completion_mask": torch.tensor([[0, 1]] * n),
        "ref_chosen_logps": rc,
        "ref_rejected_logps": rr,
    }

    def loss(loss_type, label_smoothing=0.0, beta=0.1):
        trainer.loss_types, trainer.loss_weights = [loss_type], [1.0]
        trainer.label_smoothing, trainer.beta = label_smoothing, beta
        return float(trainer._compute_loss(policy, inputs, return_outputs=False))

    return loss


def _ls(x):
    return -np.logaddexp(0.0, -np.asarray(x))  # log sigmoid


def test_trl_reads_label_smoothing_for_the_types_the_appendix_names(trl_loss):
    changed = {
        t for t in DPO_LOSS_TYPES if abs(trl_loss(t, 0.1) - trl_loss(t, 0.2)) > 1e-9
    }
    assert (
        changed
        == set(LABEL_SMOOTHING_LOSS_TYPES)
        == {
            "robust",
            "exo_pair",
            "aot",
            "aot_unpaired",
        }
    )
    # the appendix says so, naming each of them where it says what TRL reads
    cells = json.loads((BOOK / "appendix_trl_parity.ipynb").read_text())["cells"]
    text = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    (claim,) = [t for t in text if "reads `label_smoothing`" in t]
    assert all(f"`{t}`" in claim for t in changed), claim


def test_the_bco_row_is_trls_bco_pair_without_a_reward_shift(trl_loss):
    pc, pr, rc, rr = (np.array(x) for x in PAIRS)
    # each pair's own log-ratios against zero: no shift, running or of the batch
    want = np.mean(-_ls(0.1 * (pc - rc)) - _ls(-0.1 * (pr - rr)))
    assert trl_loss("bco_pair") == pytest.approx(want, rel=1e-12)
    assert trl_loss("bco_pair") == trl_loss("bco_pair")  # no state between calls
    bco = next(var for var in R.DPO_VARIANTS if var.name == "BCO")
    assert bco.config["loss_type"] == "bco_pair"
    assert "no reward shift" in bco.changes


def test_the_aot_row_describes_trls_aot_not_aot_unpaired(trl_loss):
    pc, pr, rc, rr = (np.array(x) for x in PAIRS)
    # aot: the policy's margins and the reference's, each sorted, matched by rank
    aot = np.mean(-_ls(0.1 * (np.sort(pc - pr) - np.sort(rc - rr))))
    # aot_unpaired: the chosen and the rejected log-ratios, each sorted
    unpaired = np.mean(-_ls(0.1 * (np.sort(pc - rc) - np.sort(pr - rr))))
    assert trl_loss("aot") == pytest.approx(aot, rel=1e-12)
    assert trl_loss("aot_unpaired") == pytest.approx(unpaired, rel=1e-12)
    assert abs(aot - unpaired) > 1e-3
    row = next(var for var in R.DPO_VARIANTS if var.name == "AOT")
    assert row.config["loss_type"] == "aot"
    assert "margins" in row.changes and "reference" in row.changes
