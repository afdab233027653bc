"""The base of the Panda scripted experts: a noisy per-env phase machine over IK."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from robots.actions import EEDeltaAction
from robots.math import clamp_norm, wrap_angle
from sim.tasks.panda_base import PandaTask
from sim.tasks.panda_base.ik import DiffIK


class ScriptedExpert(ABC):
    """Base of the scripted experts: per-env phase and timer tensors, and the noise knob.

    ``noise`` (0: the clean expert; about 0.1 mildly suboptimal, 0.3 often
    failing, 0.6 mostly failing) does two things:

    * Gaussian noise of std ``action_noise * noise`` (action units) is added to
      every action. With absolute joint targets (up to 2 rad per unit) a std of
      0.1 already shakes the tcp by centimetres, hence the 0.25; with joint-delta
      actions the same noise moves the targets by a fraction of a step.
    * The expert's waypoints are perturbed: every step each env redraws, with
      probability ``0.03 * noise``, a waypoint offset ~ N(0, (0.06 * noise)^2) m
      per axis (half that vertically), so large noise gives clumsy and failed
      rollouts and not just jitter.

    Subclasses implement :meth:`act`; the per-env ``phase`` and ``timer``
    tensors restart whenever the task resets an env.
    """

    action_noise = 0.25  # action noise std per unit of ``noise``
    gain = 0.5  # end-effector actions: fraction of the remaining error commanded per step

    def __init__(self, task: PandaTask, noise: float = 0.0, gen: torch.Generator | None = None):
        self.task, self.noise = task, noise
        self.gen = gen if gen is not None else torch.Generator().manual_seed(0)
        self.ik = DiffIK(task)
        n = task.sim.num_envs
        dev = task.sim.device
        self.phase = torch.zeros(n, dtype=torch.long, device=dev)
        self.timer = torch.zeros(n, dtype=torch.long, device=dev)  # steps in the current phase
        self.offset = torch.zeros(n, 3, dtype=torch.float64, device=dev)  # waypoint perturbation
        self._seen = task.episode_count.clone()

    def reset_envs(self, ids: torch.Tensor) -> None:
        """Start the script of envs ``ids`` over (called for envs that were reset)."""
        self.phase[ids] = 0
        self.timer[ids] = 0
        self.offset[ids] = 0.0

    def set_phase(self, mask: torch.Tensor, phase: int) -> None:
        """Move the envs in ``mask`` to ``phase`` and restart their timers."""
        self.phase[mask] = phase
        self.timer[mask] = 0

    def arrived(self, err: torch.Tensor, tol: float, patience: int = 25) -> torch.Tensor:
        """[B] bool: the waypoint error [B] is within ``tol``, or within ``2.5 tol`` late.

        Late: after ``patience`` steps in the phase (so jittery, noisy arms still move on).
        """
        return (err < tol) | ((self.timer >= patience) & (err < 2.5 * tol))

    def waypoint(self, target: torch.Tensor) -> torch.Tensor:
        """``target`` [B, 3] plus the current waypoint perturbation."""
        return target + self.offset

    def move(self, target: torch.Tensor, gripper_open: torch.Tensor,
             yaw: torch.Tensor | None = None) -> torch.Tensor:
        """Actions [B, action_dim] moving the tcp towards ``target`` [B, 3] (hand ``yaw`` [B]).

        In an end-effector action space the command is proportional, a straight line at
        most one full step long: ``clamp_norm(gain * e / max_step, 1)`` with ``e`` the
        target minus the commanded tcp (the measured tcp plus the tracking lag of the
        joint targets), the hand-yaw step likewise; the actions then vary smoothly with
        the state. In joint spaces: differential IK (:class:`DiffIK`).
        ``gripper_open`` [B] in [0, 1]: 0 closed, 1 open.
        """
        am, task = self.task.action_map, self.task
        if not isinstance(am, EEDeltaAction):
            return self.ik(target, gripper_open, yaw)
        kin = am.kinematics
        lag = kin.position(am.target) - kin.position(task.joint_pos.to(am.target.dtype))
        err = (target - task.ee_pos).to(lag.dtype) - lag
        a = clamp_norm(self.gain * err / am.max_step, 1.0)
        if am.yaw:
            want = am.hand_yaw if yaw is None else yaw.to(am.hand_yaw.dtype)
            turn = self.gain * wrap_angle(want - am.hand_yaw) / am.max_yaw_step
            a = torch.cat([a, turn.clamp(-1.0, 1.0)[:, None]], dim=1)
        if am.gripper_dim:  # (a gripper held closed has no action)
            a = torch.cat([a, 2.0 * gripper_open.reshape(-1, 1).to(a.dtype) - 1.0], dim=1)
        return a

    def observe(self) -> None:
        """Update ``phase`` from the current state before :meth:`act` (default: nothing).

        An expert whose phase is a function of the observed state alone (it overrides
        this) is Markovian: a behaviour cloner can learn it from observations only.
        """

    @abstractmethod
    def act(self) -> torch.Tensor:
        """Noise-free actions [B, action_dim] for the current state."""

    def __call__(self) -> torch.Tensor:
        """Actions [B, action_dim] in [-1, 1] for the current state of the task."""
        reset = self.task.episode_count != self._seen
        if reset.any():
            self.reset_envs(reset.nonzero().flatten())
            self._seen.copy_(self.task.episode_count)
        if self.noise > 0:
            n = self.offset.shape[0]
            redraw = torch.rand(n, generator=self.gen, dtype=torch.float64) < 0.03 * self.noise
            std = torch.tensor([1.0, 1.0, 0.5], dtype=torch.float64) * 0.06 * self.noise
            fresh = std * torch.randn(n, 3, generator=self.gen, dtype=torch.float64)
            dev = self.offset.device
            self.offset.copy_(torch.where(redraw[:, None].to(dev), fresh.to(dev), self.offset))
        self.observe()
        a = self.act()
        self.timer += 1
        if self.noise > 0:
            a = a + self.action_noise * self.noise * torch.randn(
                a.shape, generator=self.gen, dtype=a.dtype).to(a.device)
        return a.clamp(-1.0, 1.0)
