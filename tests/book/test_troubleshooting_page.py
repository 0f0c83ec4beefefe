"""The troubleshooting page answers, with a computation, every question practitioners
asked that the book left open (issue #41, item 4), and it is their one home: the page
that defines the log line ("Reading a TRL run") holds no symptom questions."""

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "book" / "troubleshooting.ipynb"

#: label of the section -> words its prose must use (the question it answers)
QUESTIONS = {
    "trl-trouble-loss": ["loss", "grad_norm"],
    "trl-trouble-clip": ["clip_ratio", "num_iterations"],
    "trl-trouble-signal": ["max_completion_length", "frac_reward_zero_std"],
    "trl-trouble-lr": ["learning_rate=1e-6", "LoRA", "Adam"],
    "trl-trouble-messages": ["conversational", '"role": "assistant"'],
    "trl-trouble-entropy": [
        "entropy_coef",
        "use_adaptive_entropy",
        "entropy_target",
        "top_entropy_quantile",
    ],
    "trl-trouble-kl": ["RLOOTrainer", "k_1", "negative"],
    "trl-trouble-vllm": [
        "sampling/importance_sampling_ratio/min",
        "--logprobs-mode processed_logprobs",
        "temperature",
    ],
    "trl-trouble-memory": ["per_device_train_batch_size", "gradient_checkpointing"],
    "trl-trouble-eval": ["num_generations_eval"],
    "trl-trouble-dpo-length": ["max_length", "keep_start"],
    "trl-run-dpo-ln2": ["ln 2"],
    "trl-run-dpo-chosen": ["rewards/chosen"],
    "trl-trouble-verl": ["actor/ppo_kl", "actor/kl_loss", "critic/score/mean"],
}


def _sections(path):
    """label -> [text, number of visible code cells] of each section that starts at
    one of the labels of QUESTIONS and runs to the next one."""
    nb = nbformat.read(path, as_version=4)
    sections, label = {}, None
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                found = re.fullmatch(r"\(([\w-]+)\)=", line.strip())
                if found and found.group(1) in QUESTIONS:
                    label = found.group(1)
                    sections[label] = ["", 0]
                elif label:
                    sections[label][0] += line + "\n"
        elif label and "remove-cell" not in tags and "colab-setup" not in tags:
            sections[label][1] += 1
            sections[label][0] += cell.source + "\n"
    return sections


@pytest.mark.parametrize("label", sorted(QUESTIONS))
def test_each_question_has_a_section_with_a_computation(label):
    sections = _sections(PAGE)
    assert label in sections, f"no section ({label})= on {PAGE.name}"
    text, code_cells = sections[label]
    assert code_cells >= 1, f"{label}: no visible computation"
    missing = [w for w in QUESTIONS[label] if w not in text]
    assert not missing, f"{label} does not mention {missing}"


def test_the_symptom_table_links_every_section():
    first = nbformat.read(PAGE, as_version=4).cells[0].source
    linked = set(re.findall(r"\{ref\}`[^`<]*<([\w-]+)>`", first))
    assert set(QUESTIONS) - {"trl-trouble-dpo-length"} <= linked


def test_the_log_line_page_asks_no_symptom_questions():
    run = nbformat.read(ROOT / "book" / "trl_reading_a_run.ipynb", as_version=4)
    questions = [
        line
        for cell in run.cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if line.startswith("#") and line.rstrip().endswith("?")
    ]
    assert questions == []
