"""Bad input to public functions: a clear TypeError/ValueError that names the argument,
never a silent NaN, a wrong number or another exception type (IndexError, KeyError,
AttributeError, ZeroDivisionError, ...).

Each case below was found by probing every public function with None, strings, bools,
NaN/inf, out-of-range values, empty or mis-shaped arrays and mismatched arguments;
before the fix each one misbehaved as its id says.
"""

import functools
import importlib.util

import dpo_grpo as dg
import numpy as np
import pytest
from dpo_grpo.chapters import (
    costs,
    grpo_checks,
    misconceptions,
    papers,
    parity,
    pipeline,
    pitfalls,
    reward_hacking,
    rollout,
    scoring,
    token_loss,
    troubleshooting,
    update,
)
from dpo_grpo.data import bench_results
from dpo_grpo.interactive import cost_explorer, explorables


def needs(*modules):
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


NAN = float("nan")
P, Q, S = [0.7, 0.2, 0.1], [0.2, 0.3, 0.5], [0.3, 0.3, 0.4]
R8 = [0.1, 0.5, 0.9, 0.3, 1.0, 0.0, 0.2, 0.8]
IDS8 = [0, 0, 1, 1, 2, 2, 3, 3]
SHARD8 = [0, 0, 0, 0, 1, 1, 1, 1]
MASK = [[1, 1, 0], [1, 1, 1]]
TABLE = np.log(np.full((4, 3), 1 / 3))


def _workload():
    return costs.Workload(
        n_params=1000, prompts=2, group_size=2, prompt_len=4, answer_len=8, n_gpus=2
    )


@functools.lru_cache(maxsize=None)
def _toy():
    """A tiny rollout with its rewards, statistics and loss (pipeline steps 2-6)."""
    theta = np.zeros((3, 4, 5))
    ro = rollout.sample_rollout(theta, np.array([0, 2]), 2, np.random.default_rng(0))
    fns = [scoring.target_token_reward([1, 2, 3]), scoring.length_penalty(0.02)]
    rpf = scoring.score(ro, fns)
    stats = scoring.group_statistics(rpf, ro.prompt_ids, 2)
    new = rollout.token_logps(theta + 0.01, ro.prompt_ids, ro.token_ids)
    out = token_loss.loss_and_grad(new, ro, stats.advantages, ro.old_logps, beta=0.04)
    return theta, ro, rpf, stats, out


@functools.lru_cache(maxsize=None)
def _history():
    state = pipeline.new_state(n_prompts=3, width=3, vocab=3, group_size=2)
    fns = [scoring.target_token_reward([1, 2, 1])]
    return pipeline.grpo_step(state, fns, num_iterations=1) + pipeline.grpo_step(
        state, fns, num_iterations=1
    )


def _nan_at_valid():
    new = np.zeros((2, 3))
    new[0, 0] = NAN
    return pitfalls.masked_after_exp_loss_buggy(
        new, np.zeros((2, 3)), [1.0, -1.0], MASK
    )


def _tracker_step_checked_first():
    tracker = rollout.PassRateTracker(3)
    try:
        tracker.update([0, 1], [1.0, 0.0], step=-1)
    finally:
        assert tracker.attempts.sum() == 0, (
            "update() counted the completions before rejecting step"
        )


def _result(value):
    return papers.RESULTS[0]._replace(value=value)


CASES = [
    # softmax / log-softmax / log-sigmoid: NaN, None, strings and empty arrays
    pytest.param(
        lambda: dg.softmax(None), TypeError, "logits", id="softmax-None-gave-NaN"
    ),
    pytest.param(
        lambda: dg.softmax([1.0, NAN]), ValueError, "logits", id="softmax-NaN-gave-NaN"
    ),
    pytest.param(
        lambda: dg.softmax([1.0, np.inf]),
        ValueError,
        "logits",
        id="softmax-inf-gave-NaN",
    ),
    pytest.param(
        lambda: dg.log_softmax("abc"),
        TypeError,
        "logits",
        id="log_softmax-str-numpy-error",
    ),
    pytest.param(
        lambda: dg.log_softmax([]),
        ValueError,
        "logits",
        id="log_softmax-empty-accepted",
    ),
    pytest.param(
        lambda: dg.log_sigmoid(None),
        TypeError,
        "^x must",
        id="log_sigmoid-None-gave-NaN",
    ),
    pytest.param(
        lambda: dg.sigmoid([0.0, NAN]), ValueError, "^x must", id="sigmoid-NaN-gave-NaN"
    ),
    # clipped objective, its gradient and the region labels
    pytest.param(
        lambda: dg.clipped_objective([0.9, 1.3, 1.0], [1.0, -1.0]),
        ValueError,
        "ratio and advantage",
        id="clipped_objective-shape-mismatch-numpy-error",
    ),
    pytest.param(
        lambda: dg.clipped_objective_grad([-1.0, 1.0], 1.0),
        ValueError,
        "ratio must be > 0",
        id="clipped_objective_grad-negative-ratio-accepted",
    ),
    pytest.param(
        lambda: dg.clip_region([0.0], 1.0),
        ValueError,
        "ratio must be > 0",
        id="clip_region-zero-ratio-labelled",
    ),
    pytest.param(
        lambda: dg.clip_region([1.0, 2.0], [1.0, 1.0, 1.0]),
        ValueError,
        "ratio and advantage",
        id="clip_region-shape-mismatch-numpy-error",
    ),
    pytest.param(
        lambda: dg.clipped_objective([1.5], 1.0, delta=0.5),
        ValueError,
        "delta must be > 1",
        id="clipped_objective-delta-below-1-wrong-number",
    ),
    pytest.param(
        lambda: dg.clipped_objective_grad([1.5], 1.0, delta=1.0),
        ValueError,
        "delta must be > 1",
        id="clipped_objective_grad-delta-1-wrong-number",
    ),
    # the bandit seed table
    pytest.param(
        lambda: dg.bandit_seed_table({"a": {}}, seeds=[0], steps=2, best_action=7),
        ValueError,
        "best_action",
        id="bandit_seed_table-best_action-out-of-range-IndexError",
    ),
    pytest.param(
        lambda: dg.bandit_seed_table({"a": {}}, seeds=[0], steps=2, best_action=None),
        TypeError,
        "best_action",
        id="bandit_seed_table-best_action-None-garbage",
    ),
    pytest.param(
        lambda: dg.bandit_seed_table({"a": {}}, seeds=[0], steps=2, best_action=-1),
        ValueError,
        "best_action",
        id="bandit_seed_table-negative-best_action-silent",
    ),
    pytest.param(
        lambda: dg.bandit_seed_table({"a": {}}, seeds=None, steps=2),
        TypeError,
        "seeds",
        id="bandit_seed_table-seeds-None-unnamed",
    ),
    pytest.param(
        lambda: dg.bandit_seed_table({"a": 3}, seeds=[0], steps=2),
        TypeError,
        r"configs\['a'\]",
        id="bandit_seed_table-config-not-dict-unnamed",
    ),
    # memory ledger
    pytest.param(
        lambda: dg.algorithm_ledger("ppo", 1000, critic_params=0),
        ValueError,
        "critic_params",
        id="algorithm_ledger-critic_params-named-n_params",
    ),
    pytest.param(
        lambda: dg.algorithm_ledger("ppo", 1000, reward_params="x"),
        TypeError,
        "reward_params",
        id="algorithm_ledger-reward_params-named-n_params",
    ),
    pytest.param(
        lambda: dg.algorithm_ledger("dpo", 1000, precomputed_reference="yes"),
        TypeError,
        "precomputed_reference",
        id="algorithm_ledger-str-flag-truthy",
    ),
    pytest.param(
        lambda: dg.algorithm_ledger("grpo", 1000, use_reference=None),
        TypeError,
        "use_reference",
        id="algorithm_ledger-None-flag-falsy",
    ),
    pytest.param(
        lambda: dg.training_state_ledger(1000, master_weights=None),
        TypeError,
        "master_weights",
        id="training_state_ledger-None-flag-falsy",
    ),
    # KL estimators, zero-std, bools where numbers are expected
    pytest.param(
        lambda: dg.k3_expectation(P, Q, S, ratio_weighted="yes"),
        TypeError,
        "ratio_weighted",
        id="k3_expectation-str-flag-truthy",
    ),
    pytest.param(
        lambda: dg.k3_surrogate_grad_logits([0.5, 0.1, -0.2], Q, detach_ratio=1),
        TypeError,
        "detach_ratio",
        id="k3_surrogate_grad_logits-int-flag",
    ),
    pytest.param(
        lambda: dg.zero_std_monte_carlo([0.5], 4),
        ValueError,
        "pass_rate",
        id="zero_std_monte_carlo-array-unnamed-TypeError",
    ),
    pytest.param(
        lambda: dg.zero_std_probability(True, 4),
        TypeError,
        "pass_rate",
        id="zero_std_probability-bool-as-1.0",
    ),
    pytest.param(lambda: dg.k1(True), TypeError, "delta", id="k1-bool-as-1.0"),
    # finite differences of a misbehaving function
    pytest.param(
        lambda: dg.finite_difference(lambda x: NAN, [1.0]),
        ValueError,
        "fn returned a non-finite",
        id="finite_difference-NaN-gradient",
    ),
    pytest.param(
        lambda: dg.finite_difference(lambda x: x, [1.0, 2.0]),
        TypeError,
        "fn must return one",
        id="finite_difference-array-result-unnamed",
    ),
    # costs
    pytest.param(
        lambda: costs.generation_seconds(None, 4),
        TypeError,
        "workload",
        id="generation_seconds-AttributeError",
    ),
    pytest.param(
        lambda: costs.generation_seconds(_workload(), 4, "fast"),
        TypeError,
        "throughput",
        id="generation_seconds-throughput-AttributeError",
    ),
    pytest.param(
        lambda: costs.critic_cost(_workload(), 1),
        TypeError,
        "throughput",
        id="critic_cost-throughput-AttributeError",
    ),
    pytest.param(
        lambda: costs.critic_vs_rollout(_workload(), None),
        TypeError,
        "answer_lens",
        id="critic_vs_rollout-None-unnamed",
    ),
    pytest.param(
        lambda: costs.rollout_crossover([{}]),
        ValueError,
        "rows",
        id="rollout_crossover-KeyError",
    ),
    pytest.param(
        lambda: costs.format_rows([]),
        ValueError,
        "rows must not be empty",
        id="format_rows-IndexError",
    ),
    pytest.param(
        lambda: cost_explorer.cost_figure([1e3], [8], [2], reward_model_size="big"),
        TypeError,
        "reward_model_size",
        id="cost_figure-reward_model_size-unnamed",
        marks=needs("plotly"),
    ),
    # pipeline
    pytest.param(
        lambda: scoring.score(None, [lambda p, c: 1.0]),
        TypeError,
        "rollout",
        id="score-rollout-AttributeError",
    ),
    pytest.param(
        lambda: scoring.score(_toy()[1], [lambda p, c: "a"]),
        TypeError,
        r"reward_fns\[0\]",
        id="score-str-reward-unnamed",
    ),
    pytest.param(
        lambda: scoring.target_token_reward([1.5, 2.0]),
        ValueError,
        "targets",
        id="target_token_reward-float-targets-truncated",
    ),
    pytest.param(
        lambda: scoring.target_token_reward([1, 2])(5, np.array([1])),
        ValueError,
        "prompt_id",
        id="target_token_reward-prompt_id-IndexError",
    ),
    pytest.param(
        lambda: scoring.group_statistics(_toy()[2][:2], _toy()[1].prompt_ids, 2),
        ValueError,
        "one row per prompt id",
        id="group_statistics-rows-ids-mismatch-silent",
    ),
    pytest.param(
        lambda: rollout.logits_gradient(np.zeros((2, 4, 5)), _toy()[1], _toy()[4].grad),
        ValueError,
        "prompt_ids",
        id="logits_gradient-small-theta-IndexError",
    ),
    pytest.param(
        lambda: rollout.logits_gradient(np.zeros((3, 4, 5)), None, _toy()[4].grad),
        TypeError,
        "rollout",
        id="logits_gradient-rollout-AttributeError",
    ),
    pytest.param(lambda: update.Adam(b1=1.5), ValueError, "b1", id="Adam-b1-accepted"),
    pytest.param(
        lambda: update.Adam().step(np.ones(3), np.ones(3), NAN),
        ValueError,
        "lr",
        id="Adam.step-NaN-lr-gave-NaN",
    ),
    pytest.param(
        lambda: update.Adam().step(np.ones(3), [1.0, NAN, 1.0], 0.1),
        ValueError,
        "grad",
        id="Adam.step-NaN-grad-gave-NaN",
    ),
    pytest.param(
        lambda: update.apply_update(np.zeros((3, 4, 5)), None, update.Adam(), 0.1),
        TypeError,
        "grad_theta",
        id="apply_update-None-grad-gave-NaN",
    ),
    pytest.param(
        lambda: update.apply_update(
            np.zeros((3, 4, 5)), np.zeros((3, 4, 5)), None, 0.1
        ),
        TypeError,
        "optimizer",
        id="apply_update-optimizer-AttributeError",
    ),
    pytest.param(
        lambda: update.monitor(
            _toy()[1], _toy()[3], _toy()[2], _toy()[4], reward_names=["a", "b", "c"]
        ),
        ValueError,
        "reward_names",
        id="monitor-too-many-names-IndexError",
    ),
    pytest.param(
        lambda: update.monitor(None, _toy()[3], _toy()[2], _toy()[4]),
        TypeError,
        "rollout",
        id="monitor-AttributeError",
    ),
    pytest.param(
        lambda: update.warning_signs([{}, {}]),
        ValueError,
        "history",
        id="warning_signs-KeyError",
    ),
    pytest.param(
        lambda: update.warning_signs(_history(), kl_spike=None),
        TypeError,
        "kl_spike",
        id="warning_signs-None-threshold-accepted",
    ),
    pytest.param(
        lambda: pipeline.new_state(temperature=0.0),
        ValueError,
        "temperature",
        id="new_state-zero-temperature-accepted",
    ),
    pytest.param(
        lambda: pipeline.new_state(n_prompts=3, prompts_per_step=5),
        ValueError,
        "prompts_per_step",
        id="new_state-too-many-prompts-per-step-accepted",
    ),
    pytest.param(
        lambda: pipeline.grpo_step(
            pipeline.new_state(n_prompts=3, width=3, vocab=3, group_size=2),
            [scoring.target_token_reward([1, 2, 1])],
            ref_cache=1,
        ),
        TypeError,
        "ref_cache",
        id="grpo_step-ref_cache-unnamed",
    ),
    pytest.param(
        lambda: pipeline.checkpoint(None),
        TypeError,
        "state",
        id="checkpoint-AttributeError",
    ),
    pytest.param(
        lambda: pipeline.restore({"policy": [1, 2]}, strict=False),
        ValueError,
        "policy",
        id="restore-list-policy-AttributeError",
    ),
    pytest.param(
        _tracker_step_checked_first,
        ValueError,
        "step",
        id="PassRateTracker.update-mutated-before-raise",
    ),
    pytest.param(
        lambda: rollout.token_logps(
            np.zeros((3, 4, 5)), [[0, 1], [2]], np.zeros((2, 4), int)
        ),
        TypeError,
        "prompt_ids",
        id="token_logps-ragged-ids-numpy-error",
    ),
    # pitfalls
    pytest.param(
        lambda: pitfalls.masked_after_exp_loss_buggy(
            None, np.zeros((2, 3)), [1.0, -1.0], MASK
        ),
        TypeError,
        "new_logps",
        id="masked_after_exp_loss_buggy-None-gave-NaN",
    ),
    pytest.param(
        _nan_at_valid,
        ValueError,
        "finite at every valid",
        id="masked_after_exp_loss_buggy-NaN-valid",
    ),
    pytest.param(
        lambda: pitfalls.sharding_discrepancy(
            None, R8, IDS8, [SHARD8, SHARD8], group_size=2
        ),
        TypeError,
        "fn",
        id="sharding_discrepancy-fn-unnamed",
    ),
    pytest.param(
        lambda: pitfalls.ToyTokenizer(vocab=None),
        TypeError,
        "vocab",
        id="ToyTokenizer-None-unnamed",
    ),
    pytest.param(
        lambda: pitfalls.ToyTokenizer().decode([2.7, 3.2]),
        ValueError,
        "ids",
        id="ToyTokenizer.decode-float-ids-truncated",
    ),
    pytest.param(
        lambda: pitfalls.ToyTokenizer().decode([2], skip_special_tokens="yes"),
        TypeError,
        "skip_special_tokens",
        id="ToyTokenizer.decode-str-flag-truthy",
    ),
    pytest.param(
        lambda: pitfalls.serve_text([2], None),
        TypeError,
        "tokenizer",
        id="serve_text-AttributeError",
    ),
    pytest.param(
        lambda: pitfalls.position_logps(TABLE, [-1, 0]),
        ValueError,
        "ids",
        id="position_logps-negative-id-wrapped",
    ),
    pytest.param(
        lambda: pitfalls.position_logps(TABLE, [5]),
        ValueError,
        "ids",
        id="position_logps-IndexError",
    ),
    pytest.param(
        lambda: pitfalls.assert_on_policy_ratio_is_one(
            np.zeros((2, 3)), np.ones((2, 3)), MASK, atol=NAN
        ),
        ValueError,
        "atol",
        id="assert_on_policy_ratio_is_one-NaN-atol-passed",
    ),
    pytest.param(
        lambda: pitfalls.sequence_weights(True),
        TypeError,
        "mask",
        id="sequence_weights-IndexError",
    ),
    pytest.param(
        lambda: pitfalls.sequence_weights([1, 1, 0]),
        ValueError,
        "mask must be 2-D",
        id="sequence_weights-1d-named-new_logps",
    ),
    pytest.param(
        lambda: pitfalls.reward_length_report([1.0, 0.0], [2, 4], threshold=None),
        TypeError,
        "threshold",
        id="reward_length_report-threshold-unnamed",
    ),
    pytest.param(
        lambda: pitfalls.assert_reward_model_consistent(None, [1.0, 2.0]),
        TypeError,
        "calib_old",
        id="assert_reward_model_consistent-named-scores_a",
    ),
    # reward hacking, papers
    pytest.param(
        lambda: reward_hacking.evaluate(
            reward_hacking.ANSWER_TYPES.ref_probs, n_prompts=0
        ),
        ValueError,
        "n_prompts",
        id="evaluate-n_prompts-named-n",
    ),
    pytest.param(
        lambda: reward_hacking.expected_reward(
            reward_hacking.ANSWER_TYPES._replace(names=None)
        ),
        TypeError,
        r"types\.names",
        id="expected_reward-names-None-unnamed",
    ),
    pytest.param(
        lambda: papers.gain(_result(100.0), _result(100.0)),
        ValueError,
        "before.value",
        id="gain-ZeroDivisionError",
    ),
    pytest.param(
        lambda: papers.gain(_result(NAN), _result(50.0)),
        ValueError,
        "before.value",
        id="gain-NaN",
    ),
    # parity and bench_results tables
    pytest.param(
        lambda: parity.summarize([{"a": 1}], ["a"]),
        ValueError,
        "rows lack",
        id="summarize-KeyError",
    ),
    pytest.param(
        lambda: parity.grpo_case_row({}),
        ValueError,
        "case",
        id="grpo_case_row-KeyError",
    ),
    pytest.param(
        lambda: parity.find_fixtures(3),
        TypeError,
        "directory",
        id="find_fixtures-int-pathlib-error",
    ),
    pytest.param(
        lambda: bench_results.results_directories(3),
        TypeError,
        "directory",
        id="results_directories-int-pathlib-error",
    ),
    # checks
    pytest.param(
        lambda: grpo_checks.check_group_enumeration(eps=None),
        TypeError,
        "eps",
        id="check_group_enumeration-eps-unnamed",
    ),
    pytest.param(
        lambda: grpo_checks.surrogate_gradient_error({}),
        ValueError,
        "example",
        id="surrogate_gradient_error-KeyError",
    ),
    pytest.param(
        lambda: misconceptions.kl_pull_back(steps=2, group_size=4, lr=-1.0),
        ValueError,
        "lr",
        id="kl_pull_back-negative-lr-accepted",
    ),
    pytest.param(
        lambda: misconceptions.clip_kl_toy(rare_scale=NAN, max_epochs=2),
        ValueError,
        "rare_scale",
        id="clip_kl_toy-NaN-named-new_logps",
    ),
    pytest.param(
        lambda: misconceptions.clip_kl_toy(shared="no", max_epochs=2),
        TypeError,
        "shared",
        id="clip_kl_toy-str-flag-truthy",
    ),
    pytest.param(
        lambda: grpo_checks.two_sample_gap_table(None),
        TypeError,
        "gaps",
        id="two_sample_gap_table-unnamed",
    ),
    pytest.param(
        lambda: misconceptions.group_mean_spread(
            [0.0, 1.0], [0.0, 1.0], temperatures=None
        ),
        TypeError,
        "temperatures",
        id="group_mean_spread-unnamed",
    ),
    # troubleshooting (the page "Troubleshooting a run")
    pytest.param(
        lambda: troubleshooting.lora_learning_rate(learning_rates=[0.0]),
        ValueError,
        "learning_rates",
        id="lora_learning_rate-zero-rate",
    ),
    pytest.param(
        lambda: troubleshooting.engine_weight_spread(lengths=[64.5]),
        TypeError,
        "lengths",
        id="engine_weight_spread-float-length",
    ),
    pytest.param(
        lambda: troubleshooting.temperature_mismatch(0.0),
        ValueError,
        "temperature",
        id="temperature_mismatch-zero",
    ),
    pytest.param(
        lambda: troubleshooting.eval_groups_fit(4, 8, num_generations_eval=0),
        ValueError,
        "num_generations_eval",
        id="eval_groups_fit-zero-eval-generations",
    ),
    pytest.param(
        lambda: troubleshooting.high_entropy_mask(
            np.ones((2, 3)), np.ones((2, 3)), 1.5
        ),
        ValueError,
        "top_entropy_quantile",
        id="high_entropy_mask-quantile-above-1",
    ),
    pytest.param(
        lambda: troubleshooting.adaptive_entropy_coef([[0.1]]),
        ValueError,
        "entropies",
        id="adaptive_entropy_coef-2d",
    ),
    pytest.param(
        lambda: troubleshooting.dpo_truncation(10, 5, 6, 2, 0),
        ValueError,
        "max_length",
        id="dpo_truncation-zero-max-length",
    ),
    # explorables (the data behind the figures)
    pytest.param(
        lambda: explorables.zero_std_data(g_grid=[2.5]),
        TypeError,
        "g_grid",
        id="zero_std_data-float-group-size-truncated",
    ),
    pytest.param(
        lambda: explorables.zero_std_data(p_grid=[1.5]),
        ValueError,
        "p_grid",
        id="zero_std_data-p_grid-named-pass_rate",
    ),
    pytest.param(
        lambda: explorables.zero_std_data(n_groups=[10]),
        TypeError,
        "n_groups",
        id="zero_std_data-list-unhashable",
    ),
    pytest.param(
        lambda: explorables.dpo_data(betas=(NAN,)),
        ValueError,
        "betas",
        id="dpo_data-NaN-beta-gave-NaN",
    ),
    pytest.param(
        lambda: explorables.group_advantage_data(eps_values=(0.0,)),
        ValueError,
        "eps_values",
        id="group_advantage_data-eps_values-named-eps",
    ),
    pytest.param(
        lambda: explorables.kl_estimator_data(old=[0.25] * 4),
        ValueError,
        "old",
        id="kl_estimator_data-shape-mismatch-numpy-error",
    ),
    pytest.param(
        lambda: explorables.kl_estimator_data(mixes=[1.5]),
        ValueError,
        "mixes",
        id="kl_estimator_data-mix-out-of-range-named-sampling",
    ),
    pytest.param(
        lambda: explorables.memory_ledger_data(1000, reward_model=None),
        TypeError,
        "reward_model",
        id="memory_ledger_data-None-flag-falsy",
    ),
    pytest.param(
        lambda: __import__(
            "dpo_grpo.interactive.explorable"
        ).interactive.explorable.figure_html_size(None),
        TypeError,
        "fig",
        id="figure_html_size-AttributeError",
        marks=needs("plotly"),
    ),
    pytest.param(
        lambda: __import__(
            "dpo_grpo.interactive.diagrams"
        ).interactive.diagrams.draw_pipelines(notes=None),
        TypeError,
        "notes",
        id="draw_pipelines-notes-unnamed",
        marks=needs("matplotlib"),
    ),
    pytest.param(
        lambda: __import__(
            "dpo_grpo.interactive.diagrams"
        ).interactive.diagrams.draw_pipelines(figsize=(0, 5)),
        ValueError,
        "figsize",
        id="draw_pipelines-figsize-matplotlib-error",
        marks=needs("matplotlib"),
    ),
]


@pytest.mark.parametrize("call, exc, match", CASES)
def test_bad_input_raises_a_named_error(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_ddof_accepts_numpy_integers():
    r = [[0.0, 1.0, 3.0]]
    np.testing.assert_array_equal(
        dg.group_advantages(r, ddof=np.int64(1)), dg.group_advantages(r, ddof=1)
    )


# --- torch path, lab model and lab ----------------------------------------------------


def _lab_task():
    from dpo_grpo.lab import task

    return task


@functools.lru_cache(maxsize=None)
def _lab():
    import torch
    from dpo_grpo import lab
    from dpo_grpo.lab import model as lab_model

    torch.manual_seed(0)
    model = lab_model.TinyTransformer(
        len(lab_model.VOCAB), d_model=8, n_layers=1, n_heads=2, d_ff=16, max_seq_len=12
    )
    pids, pmask = lab_model.encode_prompts(["1+2=", "3+4="])
    ro = lab_model.generate(
        model, pids, pmask, 3, generator=torch.Generator().manual_seed(0)
    )
    return (
        lab,
        lab_model,
        model,
        pids,
        pmask,
        ro,
        lab.LabConfig.preset("cpu", device="cpu"),
    )


def _torch_ops():
    from dpo_grpo import torch_ops

    return torch_ops


TORCH_CASES = [
    pytest.param(
        lambda: _torch_ops().group_advantages([[0.0, 1.0]], validate="yes"),
        TypeError,
        "validate",
        id="torch-group_advantages-str-flag-truthy",
    ),
    pytest.param(
        lambda: _torch_ops().dpo_loss([-1.0], [-2.0], [-1.0], [-2.0], validate=None),
        TypeError,
        "validate",
        id="torch-dpo_loss-None-flag-falsy",
    ),
    pytest.param(
        lambda: _torch_ops().saved_tensor_bytes(lambda: None, exclude=None),
        TypeError,
        "exclude",
        id="torch-saved_tensor_bytes-exclude-unnamed",
    ),
    pytest.param(
        lambda: _lab()[1].CharVocab(None),
        ValueError,
        "chars",
        id="CharVocab-None-unnamed",
    ),
    pytest.param(
        lambda: _lab()[1].VOCAB.decode([99]),
        ValueError,
        "vocabulary",
        id="CharVocab.decode-IndexError",
    ),
    pytest.param(
        lambda: _lab()[1].VOCAB.decode([3.7]),
        ValueError,
        "ids",
        id="CharVocab.decode-float-truncated",
    ),
    pytest.param(
        lambda: _lab_task().AdditionTask(n_terms="3"),
        TypeError,
        "n_terms",
        id="AdditionTask-str-comparison-error",
    ),
    pytest.param(
        lambda: _lab_task().AdditionTask(seed=-1),
        ValueError,
        "seed",
        id="AdditionTask-negative-seed",
    ),
    pytest.param(
        lambda: _lab_task().AdditionTask.answer([1.5, 2]),
        TypeError,
        "terms",
        id="AdditionTask.answer-float-terms",
    ),
    pytest.param(
        lambda: _lab()[1].TinyTransformer(15, n_heads=0),
        ValueError,
        "n_heads",
        id="TinyTransformer-ZeroDivisionError",
    ),
    pytest.param(
        lambda: _lab()[1].count_parameters(None),
        TypeError,
        "model",
        id="count_parameters-AttributeError",
    ),
    pytest.param(
        lambda: _lab()[1].encode_prompts("1+2="),
        TypeError,
        "prompts",
        id="encode_prompts-bare-str-split-into-chars",
    ),
    pytest.param(
        lambda: _lab()[1].encode_completions(["3"], width=-1),
        ValueError,
        "width",
        id="encode_completions-RuntimeError",
    ),
    pytest.param(
        lambda: _lab()[1].generate(_lab()[2], _lab()[3], _lab()[4], 3, temperature=0.0),
        ValueError,
        "temperature",
        id="generate-zero-temperature-RuntimeError",
    ),
    pytest.param(
        lambda: _lab()[1].generate(_lab()[2], None, _lab()[4], 3),
        TypeError,
        "prompt_ids",
        id="generate-AttributeError",
    ),
    pytest.param(
        lambda: _lab()[1].completion_logps(
            _lab()[2],
            _lab()[3],
            _lab()[4],
            _lab()[5].completion_ids,
            _lab()[5].completion_mask,
            temperature=0.0,
        ),
        ValueError,
        "temperature",
        id="completion_logps-zero-temperature-gave-NaN",
    ),
    pytest.param(
        lambda: _lab()[0].make_task("x"),
        TypeError,
        "cfg",
        id="make_task-AttributeError",
    ),
    pytest.param(
        lambda: _lab()[0].LabRun("x", "grpo", 0),
        TypeError,
        "cfg",
        id="LabRun-AttributeError",
    ),
    pytest.param(
        lambda: _lab()[0].heldout_pass_rate(
            _lab()[2], ["1+2="], _lab()[6], "cpu", samples=-1
        ),
        ValueError,
        "samples",
        id="heldout_pass_rate-ZeroDivisionError",
    ),
    pytest.param(
        lambda: _lab()[0].heldout_pass_rate(_lab()[2], ["1+2="], _lab()[6], "bogus"),
        ValueError,
        "device",
        id="heldout_pass_rate-device-RuntimeError",
    ),
    pytest.param(
        lambda: _lab()[0].rollout_vs_train_time(
            _lab()[6], "cpu", lengths=(8,), batch=2, repeats=0
        ),
        ValueError,
        "repeats",
        id="rollout_vs_train_time-zero-repeats-gave-NaN",
    ),
    pytest.param(
        lambda: _lab()[0].PromptStream([], 0),
        ValueError,
        "prompts",
        id="PromptStream-empty-accepted",
    ),
    pytest.param(
        lambda: _lab()[0].score(
            ["1+2="], _lab()[5].completion_ids, _lab()[5].finished, _lab()[6]
        ),
        ValueError,
        "prompts",
        id="lab.score-prompts-rows-mismatch-silent",
    ),
]


@needs("torch")
@pytest.mark.parametrize("call, exc, match", TORCH_CASES)
def test_bad_input_raises_a_named_error_torch(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@needs("torch")
def test_torch_ddof_accepts_numpy_integers():
    r = [[0.0, 1.0, 3.0]]
    to = _torch_ops()
    assert (
        to.group_advantages(r, ddof=np.int64(1)).tolist()
        == to.group_advantages(r, ddof=1).tolist()
    )


@needs("torch")
def test_rollout_timing_accepts_lengths_below_the_completion_length():
    lab, *_, cfg = _lab()
    rows = lab.rollout_vs_train_time(cfg, "cpu", lengths=(2,), batch=2, repeats=1)
    assert [r["completion_length"] for r in rows] == [2]
