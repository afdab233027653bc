"""Calibrated success probability: Platt fit, storage in the checkpoint, use by score()."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodied.reward.prm.calibration import SuccessCalibration, calibration_report, fit_platt
from embodied.reward.prm.checkpoint import save_prm
from embodied.reward.prm.metrics import expected_calibration_error
from embodied.reward.prm.model import LearnedPRM
from embodied.reward.prm.network import MultiViewPRM, PRMConfig


def test_platt_fit_recovers_the_scale_and_bias():
    rng = np.random.default_rng(0)
    z = rng.normal(0.0, 3.0, 40_000)
    labels = rng.random(len(z)) < 1 / (1 + np.exp(-(0.5 * z - 1.0)))
    cal = fit_platt(z, labels)
    assert cal.scale == pytest.approx(0.5, abs=0.03)
    assert cal.bias == pytest.approx(-1.0, abs=0.06)


def test_separated_states_give_a_finite_fit_and_one_class_is_refused():
    z = np.array([-4.0, -3.0, -2.0, 2.0, 3.0, 4.0])
    labels = z > 0
    cal = fit_platt(z, labels)
    assert np.isfinite(cal.scale) and 0 < cal.scale < 10 and abs(cal.bias) < 1
    with pytest.raises(ValueError, match="successful and unsuccessful"):
        fit_platt(z, np.ones(6, bool))
    report = calibration_report(np.full(6, 0.9), np.ones(6, bool))
    assert report["scale"] == 1.0 and report["bias"] == 0.0 and "skipped" in report


def test_ece_measures_the_gap_between_probability_and_frequency():
    rng = np.random.default_rng(1)
    p = rng.random(50_000)
    assert expected_calibration_error(p, rng.random(len(p)) < p) < 0.01
    assert expected_calibration_error(np.full(100, 0.9), np.zeros(100, bool)) == \
        pytest.approx(0.9)


def test_score_applies_the_checkpoints_calibration(tmp_path):
    torch.manual_seed(0)
    cfg = PRMConfig(image_size=32, text="learned", dim=32, channels=[8, 16, 16])
    net = MultiViewPRM(cfg).eval()
    frames = torch.randint(0, 256, (6, 3, 32, 32, 3), dtype=torch.uint8)
    text = "move the gripper to the red ball"
    with torch.no_grad():
        _, logit = net(frames, [text] * 6)
    cal = SuccessCalibration(scale=0.5, bias=-1.0)
    save_prm(tmp_path / "prm.pt", net, {"instruction": text, "cameras": cfg.cameras,
                                        "success_calibration": {"scale": 0.5, "bias": -1.0}})
    out = LearnedPRM(tmp_path).score(frames, text, cameras=list(cfg.cameras))
    torch.testing.assert_close(out.success_prob, cal.probability(logit), atol=1e-5, rtol=0)
    # a checkpoint without one scores with the raw head
    save_prm(tmp_path / "raw" / "prm.pt", net, {"instruction": text, "cameras": cfg.cameras})
    raw = LearnedPRM(tmp_path / "raw").score(frames, text, cameras=list(cfg.cameras))
    torch.testing.assert_close(raw.success_prob, logit.sigmoid(), atol=1e-5, rtol=0)
    torch.testing.assert_close(raw.progress, out.progress)
