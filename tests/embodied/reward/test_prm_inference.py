"""The PRM's fast scoring path gives the numbers of ``MultiViewPRM.predict``."""

from __future__ import annotations

import pytest
import torch

from embodied.reward.prm.inference import FastScorer, make_scorer
from embodied.reward.prm.network import MultiViewPRM, PRMConfig


@pytest.fixture(scope="module")
def net() -> MultiViewPRM:
    torch.manual_seed(0)
    net = MultiViewPRM(PRMConfig(image_size=32, text="learned", dim=32, channels=[8, 16, 16]))
    with torch.no_grad():  # non-zero view embeddings, so the view order matters
        net.view_embedding.normal_()
    return net.eval()


def frames(b: int, size: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (b, 3, size, size, 3), dtype=torch.uint8, generator=gen)


def test_fast_path_equals_predict_at_the_model_size(net):
    fast = make_scorer(net)
    assert isinstance(fast, FastScorer)
    texts = ["reach the goal"] * 5 + ["push the cube"] * 3
    present = torch.ones(8, 3, dtype=torch.bool)
    present[0, 1] = present[3, 0] = present[3, 2] = False
    with torch.inference_mode():
        for mask in (None, present):
            want = net.predict(frames(8, 32), texts, mask)
            for _ in range(2):  # the second call reuses the float workspace
                got = fast(frames(8, 32), texts, mask)
                torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=0)
                torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=0)
        # a batch of another size gets its own workspace, not a stale one
        torch.testing.assert_close(fast(frames(3, 32, seed=1), texts[:3])[0],
                                   net.predict(frames(3, 32, seed=1), texts[:3])[0],
                                   atol=1e-5, rtol=0)


def test_fast_path_resizes_in_uint8_within_rounding(net):
    big = frames(8, 48)
    with torch.inference_mode():
        want = net.predict(big, ["x"] * 8)[0]
        got = make_scorer(net)(big, ["x"] * 8)[0]
    # the uint8 resize rounds each pixel to the nearest level: a tiny change in progress
    assert (got - want).abs().max() < 0.02


def test_fast_path_is_for_the_cnn_encoder_only(net):
    with pytest.raises(ValueError, match="cnn encoder"):
        FastScorer(type("Net", (), {"encoder": torch.nn.Identity()})())


@pytest.mark.parametrize("context", ["none", "start"])
def test_fast_path_equals_predict_with_concatenated_views(context):
    torch.manual_seed(0)
    net = MultiViewPRM(PRMConfig(image_size=32, text="learned", dim=32, channels=[8, 16, 16],
                                 fusion="concat", context=context)).eval()
    views = len(net.slots)
    x = torch.randint(0, 256, (6, views, 32, 32, 3), dtype=torch.uint8,
                      generator=torch.Generator().manual_seed(2))
    present = torch.ones(6, views, dtype=torch.bool)
    present[1, 0] = present[4, 1:] = False
    with torch.inference_mode():
        for mask in (None, present):
            want = net.predict(x, ["reach"] * 6, mask)
            got = make_scorer(net)(x, ["reach"] * 6, mask)
            torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=0)
            torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=0)
