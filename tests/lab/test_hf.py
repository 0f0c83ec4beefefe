"""Tests of dpo_grpo.lab.hf: the addition task on a Hugging Face causal LM, offline on a
tiny random Qwen2 model with a locally built tokenizer (no download)."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from dpo_grpo.lab import hf  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    return hf.tiny_random_model(0)


def test_tokenizer_and_chat_template_are_chatml(tiny):
    model, tok = tiny
    assert (
        type(model).__name__ == "Qwen2ForCausalLM" and model.config.tie_word_embeddings
    )
    text = tok.apply_chat_template(
        [{"role": "user", "content": "3+5="}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert text == "<|im_start|>user\n3+5=<|im_end|>\n<|im_start|>assistant\n"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert (
        ids[0] == tok.convert_tokens_to_ids("<|im_start|>")
        and len(ids) == 2 + len("user\n3+5=\nassistant\n") + 1
    )
    assert (
        tok.decode(tok("12+34=\n", add_special_tokens=False)["input_ids"]) == "12+34=\n"
    )
    cfg = hf.HFLabConfig.preset("tiny-random")
    pids, pmask = hf.encode_chat_prompts(tok, ["3+5=", "12+34="], cfg)
    assert (
        pmask.sum(1)
        == torch.tensor(
            [
                len(tok(t, add_special_tokens=False)["input_ids"])
                for t in [
                    tok.apply_chat_template(
                        [
                            {"role": "system", "content": cfg.system_prompt},
                            {"role": "user", "content": p},
                        ],
                        tokenize=False,
                        add_generation_prompt=True,
                    )
                    for p in ["3+5=", "12+34="]
                ]
            ]
        )
    ).all()
    assert not pmask[0, 0] and pmask[1].all()  # left padding on the shorter prompt


def test_sampler_logps_equal_trainer_logps_and_padding_is_invisible(tiny):
    model, tok = tiny
    cfg = hf.HFLabConfig.preset("tiny-random")
    pids, pmask = hf.encode_chat_prompts(tok, ["3+5=", "12+34=", "7+8="], cfg)
    cids, cmask, logps, done = hf.hf_generate(
        model,
        pids,
        pmask,
        6,
        tok.eos_token_id,
        tok.pad_token_id,
        generator=torch.Generator().manual_seed(3),
    )
    again = hf.hf_logps(model, pids, pmask, cids, cmask)
    torch.testing.assert_close(again[cmask], logps[cmask], rtol=0, atol=1e-5)
    # the padded first row gives the same log-probs as the same prompt alone (positions
    # count real tokens)
    alone_p, alone_m = hf.encode_chat_prompts(tok, ["3+5="], cfg)
    alone = hf.hf_logps(model, alone_p, alone_m, cids[:1], cmask[:1])
    torch.testing.assert_close(
        alone[cmask[:1]], again[:1][cmask[:1]], rtol=0, atol=1e-5
    )
    # decoding stops at the end-of-turn token
    ids = torch.tensor(
        [
            [
                tok.convert_tokens_to_ids("4"),
                tok.convert_tokens_to_ids("2"),
                tok.eos_token_id,
            ]
        ]
    )
    assert hf.decode_completions(tok, ids, torch.ones_like(ids, dtype=torch.bool)) == [
        "42"
    ]
    assert hf.hf_score(["40+2="], ["42"], [True]).tolist() == [[1.0]]
    # no end of turn: truncated
    assert hf.hf_score(["40+2="], ["42"], [False]).tolist() == [[0.0]]


def test_grpo_on_the_tiny_model_updates_it_with_the_books_loss():
    model, tok = hf.tiny_random_model(1)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    cfg = hf.HFLabConfig.preset("tiny-random", grpo_steps=2, num_generations=8)

    def starts_with_digit(
        prompts, texts, finished
    ):  # a reward a random model earns sometimes: mixed groups
        return torch.tensor([[1.0 if t[:1].isdigit() else 0.0] for t in texts])

    h = hf.run_hf_grpo(cfg, model, tok, seed=0, reward_fn=starts_with_digit)
    assert (
        h["step"] == [1, 2]
        and h["eval_step"] == [0, 2]
        and len(h["heldout_pass_rate"]) == 2
    )
    assert max(h["reward_mean"]) > 0 and min(h["frac_reward_zero_std"]) < 1
    assert h["kl"][-1] > 0  # the policy moved away from the frozen copy
    assert any(not torch.equal(before[k], p) for k, p in model.named_parameters())
    assert all(t > 0 for t in h["step_time_s"])


def test_load_pretrained_reads_a_saved_checkpoint(tmp_path, tiny):
    model, tok = tiny
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    cfg = hf.HFLabConfig.preset("qwen2.5-0.5b", model_name=str(tmp_path))
    loaded, ltok = hf.load_pretrained(cfg, "cpu")
    assert ltok.padding_side == "left" and ltok.chat_template == tok.chat_template
    ids = torch.tensor([[3, 10, 20]])
    torch.testing.assert_close(
        loaded(input_ids=ids).logits, model(input_ids=ids).logits
    )
    assert (
        hf.HFLabConfig.preset("qwen2.5-0.5b").model_name == "Qwen/Qwen2.5-0.5B-Instruct"
    )


@pytest.mark.parametrize(
    "field, value",
    [
        ("num_generations", 1),
        ("epsilon", 1.5),
        ("beta", -1.0),
        ("grpo_lr", 0.0),
        ("dtype", "int8"),
        ("model_name", ""),
        ("max_completion_length", 0),
    ],
)
def test_invalid_hf_config_names_the_field(field, value):
    with pytest.raises((ValueError, TypeError), match=field):
        dataclasses.replace(hf.HFLabConfig(), **{field: value})
    with pytest.raises(ValueError, match="preset"):
        hf.HFLabConfig.preset("llama")


@pytest.mark.parametrize(
    "call, error, name",
    [
        (
            lambda tok, m: hf.encode_chat_prompts(tok, "3+5=", hf.HFLabConfig()),
            TypeError,
            "prompts",
        ),
        (lambda tok, m: hf.encode_chat_prompts(tok, ["3+5="], "cfg"), TypeError, "cfg"),
        (
            lambda tok, m: hf.hf_generate(m, None, None, 3, 1, 0),
            TypeError,
            "prompt_ids",
        ),
        (
            lambda tok, m: hf.hf_generate(
                m,
                torch.ones(1, 3, dtype=torch.long),
                torch.ones(1, 3, dtype=torch.bool),
                0,
                1,
                0,
            ),
            ValueError,
            "max_new_tokens",
        ),
        (
            lambda tok, m: hf.hf_logps(
                m,
                torch.ones(2, 3, dtype=torch.long),
                torch.ones(2, 3, dtype=torch.bool),
                torch.ones(1, 2, dtype=torch.long),
                torch.ones(1, 2, dtype=torch.bool),
            ),
            ValueError,
            "completion_ids",
        ),
        (
            lambda tok, m: hf.hf_score(["1+2="], ["3", "4"], [True]),
            ValueError,
            "same length",
        ),
        (
            lambda tok, m: hf.tiny_random_model(0, hidden_size=12),
            ValueError,
            "hidden_size",
        ),
        (
            lambda tok, m: hf.run_hf_grpo(hf.HFLabConfig(), m, tok, reward_fn=3),
            TypeError,
            "reward_fn",
        ),
    ],
)
def test_hf_functions_reject_bad_input_naming_the_argument(tiny, call, error, name):
    model, tok = tiny
    with pytest.raises(error, match=name):
        call(tok, model)
