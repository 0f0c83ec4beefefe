"""dpo_grpo.chapters.text_tokens: chapter 4's sentence, token by token (tokenizer,
bigram model, batch layout, shifted log-probs), checked by brute force."""

import itertools

import numpy as np
import pytest
from dpo_grpo.chapters import text_tokens as tt

PROMPT = "The capital of France is"
ANSWERS = [" Paris.", " Rome.", " a city on the Seine."]


@pytest.fixture(scope="module")
def tok():
    return tt.WordTokenizer()


def test_pieces_keep_their_space_and_round_trip(tok):
    assert tok.vocab[:3] == [tt.PAD, tt.BOS, tt.EOS]
    ids = tok.encode(" a city on the Seine.")
    assert tok.pieces(ids) == [" a", " city", " on", " the", " Seine", "."]
    assert "".join(tok.pieces(tok.encode(tt.CORPUS[0]))) == tt.CORPUS[0]
    # a sentence-initial word and the same word after a space are two pieces
    assert tok.id_of["Paris"] != tok.id_of[" Paris"]


def test_bad_input_names_the_argument(tok):
    with pytest.raises(ValueError, match="outside the vocabulary.*' Berlin'"):
        tok.encode(" Berlin.")
    with pytest.raises(TypeError, match="text"):
        tok.encode(3)
    with pytest.raises(ValueError, match="prompt"):
        tt.encode_batch(tok, " ", ANSWERS)
    with pytest.raises(ValueError, match="completions"):
        tt.encode_batch(tok, PROMPT, [])
    with pytest.raises(TypeError, match="tokenizer"):
        tt.bigram_logprobs("gpt2")
    with pytest.raises(ValueError, match="alpha"):
        tt.bigram_logprobs(tok, alpha=0)
    with pytest.raises(ValueError, match="ids"):
        tok.pieces([0, 99])


def test_bigram_rows_are_distributions_fitted_by_counting(tok):
    table = tt.bigram_logprobs(tok, alpha=0.5)
    np.testing.assert_allclose(np.exp(table).sum(axis=1), 1.0, rtol=0, atol=1e-12)
    n = len(tok.vocab)
    # " is" is followed by " Paris", " Rome" and twice by " a" in the corpus
    is_, a = tok.id_of[" is"], tok.id_of[" a"]
    assert np.exp(table[is_, a]) == pytest.approx((2 + 0.5) / (4 + 0.5 * n))
    # <pad> is never counted: only the smoothing, a uniform row
    np.testing.assert_allclose(np.exp(table[tok.id_of[tt.PAD]]), 1 / n)


def test_batch_layout_roles_and_mask(tok):
    batch = tt.encode_batch(tok, PROMPT, ANSWERS)
    head = 1 + len(tok.encode(PROMPT))
    lengths = [len(tok.encode(a)) + 1 for a in ANSWERS]  # + <eos>
    assert batch.ids.shape == (3, head + max(lengths))
    for row, ids, roles, n in zip(range(3), batch.ids, batch.roles, lengths):
        assert "".join(roles) == "P" * head + "C" * n + "." * (max(lengths) - n)
        assert ids[0] == tok.id_of[tt.BOS] and ids[head + n - 1] == tok.id_of[tt.EOS]
        assert (ids[head + n :] == tok.id_of[tt.PAD]).all()
        np.testing.assert_array_equal(batch.mask[row], roles == tt.COMPLETION)


def test_the_chapters_shift_sums_to_the_sequence_log_prob(tok):
    table = tt.bigram_logprobs(tok)
    batch = tt.encode_batch(tok, PROMPT, ANSWERS)
    logps = np.zeros(batch.ids.shape)  # as chapter 4's cell computes them
    logps[:, 1:] = table[batch.ids[:, :-1], batch.ids[:, 1:]]
    # the sequence log-prob of " Paris." by hand: P(Paris | is) P(. | Paris) P(eos | .)
    ids = [tok.id_of[p] for p in (" is", " Paris", ".", tt.EOS)]
    by_hand = sum(table[a, b] for a, b in itertools.pairwise(ids))
    assert (logps[0] * batch.mask[0]).sum() == pytest.approx(by_hand, abs=1e-12)
    # padding is scored too; only the mask keeps it out
    assert logps[0, -1] == table[tok.id_of[tt.PAD], tok.id_of[tt.PAD]] != 0
