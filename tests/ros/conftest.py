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


def _export(path: Path, task: str, module=None, algo: dict | None = None, **env_cfg) -> Path:
    """``module`` (default: a freshly initialised ActorCritic) for ``task`` exported by the
    real export code (TorchScript with the metadata inside) to ``path``."""
    import torch
    from omegaconf import OmegaConf

    from embodied.export import DeployedPolicy, policy_metadata, write_torchscript
    from embodied.rl.actor_critic import ActorCritic
    from sim import make_env

    torch.manual_seed(0)
    env = make_env(task, num_envs=1, seed=0, **env_cfg)
    try:
        if module is None:
            module = DeployedPolicy(ActorCritic(env.obs_dim, env.action_dim).eval())
        cfg = OmegaConf.create({"task": {"name": task}, "seed": 0})
        meta = policy_metadata(cfg, env, Path("untrained"), {"config": algo or {}})
    finally:
        env.close()
    return write_torchscript(module, path, meta)


@pytest.fixture(scope="session")
def untrained_go2_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A go2_walk policy from a freshly initialised ActorCritic, through the real export code
    (TorchScript with the metadata inside): exercises the legged path without a walker."""
    return _export(tmp_path_factory.mktemp("go2_untrained") / "policy.pt", "go2_walk")


def _saturated(obs_dim: int, action_dim: int, seed: int = 0):
    """A traceable module [N, obs_dim] -> [N, action_dim]: ``sign(sin(W obs))``, full-scale
    actions that change with the observation."""
    import torch

    class Saturated(torch.nn.Module):
        def __init__(self):
            super().__init__()
            gen = torch.Generator().manual_seed(seed)
            self.register_buffer("w", 40.0 * torch.randn(obs_dim, action_dim, generator=gen))
            self.obs_dim = obs_dim

        def forward(self, obs):
            return torch.sign(torch.sin(obs @ self.w))

    return Saturated()


@pytest.fixture(scope="session")
def push_test_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A panda_push policy (ee_delta actions at 20 Hz, as the shipped push settings train)
    whose actions are full-scale and change with every observation: stresses the push
    path's IK and limits without a trained pusher."""
    module = _saturated(40, 4)
    return _export(tmp_path_factory.mktemp("push") / "policy.pt", "panda_push", module,
                   action="ee_delta", decimation=10, episode_length_s=4.0)


# Where the chunked test policy reads the sign of its gripper action: target_rel x
# (reach goal minus tcp, the 27th of panda_reach's 29 observations).
CHUNK_SIGN_INDEX, CHUNK = 26, 4


@pytest.fixture(scope="session")
def chunked_reach_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A panda_reach policy exported with action chunks (4 steps, temporally ensembled):
    arm actions 0 (hold the default pose) and, in every chunk step, the gripper action
    sign(goal x - tcp x): open for a goal ahead of the tcp, closed for one behind it."""
    import torch

    class Chunks(torch.nn.Module):
        obs_dim = 29

        def forward(self, obs):
            action = torch.zeros(obs.shape[0], 8)
            action[:, 7] = torch.sign(obs[:, CHUNK_SIGN_INDEX])
            return action.repeat(1, CHUNK)

    return _export(tmp_path_factory.mktemp("chunked") / "policy.pt", "panda_reach", Chunks(),
                   algo={"chunk": CHUNK, "ensemble_decay": 0.1})
