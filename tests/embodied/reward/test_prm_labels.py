"""PRM labels and metrics against hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodied.reward.prm.labels import (
    UNRELATED_INSTRUCTIONS,
    bin_centers,
    context_starts,
    counterfactual_instructions,
    expected_progress,
    near_miss_instructions,
    progress_to_bins,
    relative_progress,
    temporal_clips,
    two_hot,
)
from embodied.reward.prm.metrics import (
    auroc,
    counterfactual_metrics,
    f1,
    pairwise_accuracy,
    progress_metrics,
    ranks,
    spearman,
    voc,
)
from embodied.reward.prm.text import SYNONYMS, TRAIN_VARIANTS, paraphrase
from embodied.reward.prm.train import TrainConfig, instructions


def test_bins_and_two_hot():
    assert bin_centers(5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert progress_to_bins(torch.tensor([0.0, 0.1, 0.13, 0.5, 1.0, 1.7, -0.2]), 5).tolist() == \
        [0, 0, 1, 2, 4, 4, 0]
    target = two_hot(torch.tensor([0.5, 0.125, 1.0, 0.0]), 5)
    assert torch.allclose(target[0], torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0]))
    assert torch.allclose(target[1], torch.tensor([0.5, 0.5, 0.0, 0.0, 0.0]))
    assert torch.allclose(target[2], torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0]))
    assert torch.allclose(target[3], torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0]))
    p = torch.rand(100)
    assert torch.allclose((two_hot(p, 21) * bin_centers(21)).sum(1), p, atol=1e-6)
    # the expected value of a distribution that is all on one bin is that bin's centre
    logits = torch.full((1, 5), -1e4)
    logits[0, 3] = 0.0
    assert expected_progress(logits).item() == pytest.approx(0.75)
    with pytest.raises(ValueError, match="num_bins"):
        bin_centers(1)


def test_temporal_clips_stop_before_success():
    rng = np.random.default_rng(0)
    success = np.array([0, 0, 0, 0, 0, 1, 1, 1], bool)
    ends = temporal_clips(success, 10, rng)
    assert ends == [1, 2, 3, 4]  # every end before the first success (>= 2 frames long)
    assert not success[ends].any()
    assert temporal_clips(np.array([1, 1, 1], bool), 3, rng) == []
    ends = temporal_clips(np.zeros(50, bool), 5, rng)
    assert len(ends) == 5 and all(1 <= e < 50 for e in ends)


def test_counterfactual_instructions_exclude_the_task():
    out = counterfactual_instructions("Move the gripper to the red ball",
                                      ["move the gripper to the red ball", "push the cube",
                                       "push the cube"])
    assert "push the cube" in out and out.count("push the cube") == 1
    assert not any(t.lower() == "move the gripper to the red ball" for t in out)
    assert set(UNRELATED_INSTRUCTIONS) <= set(out)


def test_metrics_hand_made():
    assert voc(np.array([0.1, 0.2, 0.5, 0.9])) == pytest.approx(1.0)
    assert voc(np.array([0.9, 0.5, 0.2, 0.1])) == pytest.approx(-1.0)
    assert ranks(np.array([3.0, 1.0, 3.0])).tolist() == [1.5, 0.0, 1.5]
    assert spearman(np.array([1, 2, 3]), np.array([10, 20, 15])) == pytest.approx(0.5)
    assert auroc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == pytest.approx(0.75)
    assert np.isnan(auroc(np.array([0.1, 0.2]), np.array([1, 1])))
    assert f1(np.array([1, 1, 0, 0], bool), np.array([1, 0, 1, 0], bool)) == pytest.approx(0.5)
    acc, n = pairwise_accuracy(np.array([0.0, 0.5, 0.4]), np.array([0.0, 0.5, 1.0]))
    assert n == 3 and acc == pytest.approx(2 / 3)
    cf = counterfactual_metrics(np.array([0.9, 0.8]), np.array([0.1, 0.85]))
    assert cf["counterfactual_gap"] == pytest.approx(0.375)
    assert cf["counterfactual_auroc"] == pytest.approx(0.75)


def test_progress_metrics_voc_stops_at_first_success():
    # after the first success the prediction wobbles; VOC only reads the part before
    pred = [np.array([0.0, 0.3, 0.6, 1.0, 0.9, 0.95, 0.9])]
    true = [np.array([0.0, 0.3, 0.6, 1.0, 1.0, 1.0, 1.0])]
    ok = [true[0] >= 1.0]
    m = progress_metrics(pred, true, ok, [True], [ok[0].astype(float)])
    assert m["voc"] == pytest.approx(1.0) and m["voc_reversed"] == pytest.approx(-1.0)
    assert m["success_f1"] == 1.0 and m["success_auroc"] == 1.0


def test_near_miss_instructions_change_one_detail():
    reach = near_miss_instructions("move the gripper to the red ball")
    assert reach["colour"] == ["move the gripper to the green ball",
                               "move the gripper to the blue ball"]
    assert reach["object"] == ["move the gripper to the red cube"]
    assert reach["relation"] == ["move the gripper away from the red ball"]
    push = near_miss_instructions("push the red cube into the green goal region")
    assert "push the red cube out of the green goal region" in push["relation"]
    assert all("red" not in t or "green" not in t for t in push["colour"])
    assert near_miss_instructions("walk forward") == {"colour": [], "object": [],
                                                      "relation": []}


def test_paraphrases_keep_training_and_held_out_words_apart():
    rng = np.random.default_rng(0)
    text = "move the gripper to the red ball"
    train = {paraphrase(text, rng) for _ in range(200)}
    held = {paraphrase(text, rng, held_out=True) for _ in range(200)}
    assert text in train and len(train) > 5 and len(held) > 5 and not train & held
    assert all("red" in t for t in train | held)
    # every held-out wording uses a synonym training never draws
    unseen = [o for options in SYNONYMS.values() for o in options[TRAIN_VARIANTS:]]
    assert all(any(o in t for o in unseen) for t in held)


def test_minibatch_instructions_mark_the_negatives():
    cfg = TrainConfig(counterfactual_prob=0.2, near_miss_prob=0.3, paraphrase_prob=0.5)
    true = "move the gripper to the red ball"
    near = [t for v in near_miss_instructions(true).values() for t in v]
    texts, negative = instructions(true, ["open the top drawer"], near, 4000, cfg,
                                   np.random.default_rng(0))
    assert negative.mean() == pytest.approx(0.5, abs=0.03)
    assert all((t in near or t == "open the top drawer") == bool(neg)
               for t, neg in zip(texts, negative, strict=True))
    positives = [t for t, neg in zip(texts, negative, strict=True) if not neg]
    # reworded half the time; a rewording keeps all 3 phrases and no framing 1 time in 24
    assert np.mean([t == true for t in positives]) == pytest.approx(0.5 + 0.5 / 24, abs=0.04)


def test_relative_progress_and_context_starts():
    rel = relative_progress(np.array([0.5, 0.2, 1.0, 0.9]), np.array([0.0, 0.6, 0.5, 1.0]))
    assert rel == pytest.approx([0.5, 0.0, 1.0, 0.0])
    # two episodes: rows 0-4 and 5-9, progress rising
    progress = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 0.0, 0.25, 0.5, 0.75, 1.0], np.float32)
    first = np.repeat([0, 5], 5)
    last = np.repeat([4, 9], 5)
    rows = np.array([2, 3, 7, 8] * 500)
    rng = np.random.default_rng(0)
    start, target = context_starts(rows, first, last, progress, 0.0, 0.0, rng)
    assert (start == first[rows]).all() and target == pytest.approx(progress[rows])
    start, target = context_starts(rows, first, last, progress, 0.3, 0.3, rng)
    assert (first[rows] <= start).all() and (start <= last[rows]).all()
    later = start > rows
    assert 0.25 < later.mean() < 0.35 and (target[later] == 0).all()
    earlier = (start < rows) & (start > first[rows])
    assert earlier.any() and (target[earlier] == relative_progress(
        progress[rows[earlier]], progress[start[earlier]])).all()
    assert (target[earlier] < progress[rows[earlier]]).all()
