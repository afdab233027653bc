"""Fixtures of the ROS 2 bridge tests: a private DDS graph per test and test policies.

Every test that talks DDS runs in a fresh network namespace with only a loopback
interface when this process may create one (root), otherwise with discovery limited to
localhost and a unique ROS_DOMAIN_ID; either way no discovery traffic leaves the machine.
Node processes are stopped (their whole process groups) when the test ends.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="the ROS 2 wheels are not installed: "
                    "pip install -e '.[ros]' (scripts/bootstrap.sh does)")
pytest.importorskip("embodied_ros", reason="embodied_ros is not installed: "
                    "pip install -e ros_ws/src/embodied_ros (scripts/bootstrap.sh does)")

from embodied_ros.graph import RosGraph, private_graph

REPO = Path(__file__).resolve().parents[2]
PANDA_POLICY = REPO / "assets" / "policies" / "panda_reach" / "policy.pt"
GO2_POLICY = REPO / "assets" / "policies" / "go2_walk" / "policy.pt"
_counter = itertools.count()


@pytest.fixture
def ros_graph(tmp_path: Path) -> Iterator[RosGraph]:
    """A private DDS graph: network namespace if possible, else localhost + unique domain."""
    with private_graph(tmp_path, seed=next(_counter)) as graph:
        yield graph


@pytest.fixture(scope="session")
def panda_policy() -> Path:
    """The small exported panda_reach policy in assets/."""
    if not PANDA_POLICY.is_file():
        pytest.fail(f"{PANDA_POLICY} is missing (see assets/policies/panda_reach/README.md)")
    return PANDA_POLICY


@pytest.fixture(scope="session")
def go2_walk_policy() -> Path:
    """The exported walking Go2 policy in assets/ (skips until it exists)."""
    if not GO2_POLICY.is_file():
        pytest.skip("no walking Go2 policy yet: export one to assets/policies/go2_walk/ "
                    "(same layout as panda_reach) and this test runs")
    return GO2_POLICY


@pytest.fixture(scope="session")
def untrained_go2_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A go2_walk policy from a freshly initialised ActorCritic, through the real export code
    (TorchScript with the metadata inside): exercises the legged path without a walker."""
    import torch
    from omegaconf import OmegaConf

    from embodied.export import DeployedPolicy, policy_metadata, write_torchscript
    from embodied.rl.actor_critic import ActorCritic
    from sim import make_env

    torch.manual_seed(0)
    env = make_env("go2_walk", num_envs=1, seed=0)
    try:
        policy = ActorCritic(env.obs_dim, env.action_dim).eval()
        cfg = OmegaConf.create({"task": {"name": "go2_walk"}, "seed": 0})
        meta = policy_metadata(cfg, env, Path("untrained"), {})
    finally:
        env.close()
    path = tmp_path_factory.mktemp("go2_untrained") / "policy.pt"
    return write_torchscript(DeployedPolicy(policy), path, meta)
