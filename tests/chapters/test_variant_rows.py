"""Chapter 10's tables of variants (:mod:`dpo_grpo.chapters.variant_rows`): each row's
"what it changes" shows in the reader's language through the tables layer."""

import html
import re

from dpo_grpo import tables
from dpo_grpo.chapters import variant_rows as R
from dpo_grpo.i18n import needs_translation

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
