"""The policy node's parameters (``config/<robot>.yaml``), their defaults and checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OUTPUTS = ("joint_trajectory", "position_array")
# timer: a control step every control_dt on the newest state (robots whose state comes
# faster than the control rate); state: a step on every JointState (at most every half
# period; state at the control rate, as the simulated robot sends), the timer then only
# watches for stale state.
TRIGGERS = ("timer", "state")
SAFE_MODES = ("hold", "damp")
# zero: a JointTrajectory starts when the controller receives it (a zero header stamp);
# now: stamped with the node's clock at publishing (controller and node share a clock).
TRAJECTORY_STAMPS = ("zero", "now")

PARAMETERS: dict[str, Any] = {
    "robot": "",
    "policy_path": "",
    "autostart": False,
    "control_dt": 0.02,
    "trigger": "timer",
    "output": "joint_trajectory",
    "trajectory_horizon": 0.02,
    "trajectory_stamp": "zero",
    "command_gripper": False,
    "safe_mode": "hold",
    "watchdog_periods": 3.0,
    "watchdog_recover_periods": 2.0,
    "joint_limit_margin": 0.02,
    "max_target_step": 0.25,
    "torque_limit_scale": 1.0,
    "soft_start_s": 2.0,
    "resume_window_s": 0.5,
    "object_max_age_s": 0.3,
    "attitude_limit": 0.0,
    "obs_clip": 100.0,
    "stats_period_s": 5.0,
}


class ConfigError(ValueError):
    """Parameters that do not fit the robot spec or each other."""


@dataclass(frozen=True)
class Params:
    """The node's parameters, validated."""

    robot: str
    policy_path: str
    autostart: bool
    control_dt: float
    trigger: str
    output: str
    trajectory_horizon: float
    trajectory_stamp: str
    command_gripper: bool
    safe_mode: str
    watchdog_periods: float
    watchdog_recover_periods: float
    joint_limit_margin: float
    max_target_step: float
    torque_limit_scale: float
    soft_start_s: float
    resume_window_s: float
    object_max_age_s: float
    attitude_limit: float
    obs_clip: float
    stats_period_s: float

    def check(self) -> None:
        """Raise :class:`ConfigError` for values outside their allowed sets."""
        if not self.robot:
            raise ConfigError("parameter 'robot' is empty: set it (e.g. robot:=go2)")
        if not self.policy_path:
            raise ConfigError("parameter 'policy_path' is empty: pass policy:=PATH to the "
                              "launch file (an exported policy.pt or policy.onnx)")
        if self.trigger not in TRIGGERS:
            raise ConfigError(f"trigger '{self.trigger}' is not one of {TRIGGERS}")
        if self.output not in OUTPUTS:
            raise ConfigError(f"output '{self.output}' is not one of {OUTPUTS}")
        if self.safe_mode not in SAFE_MODES:
            raise ConfigError(f"safe_mode '{self.safe_mode}' is not one of {SAFE_MODES}")
        if self.trajectory_stamp not in TRAJECTORY_STAMPS:
            raise ConfigError(f"trajectory_stamp '{self.trajectory_stamp}' is not one of "
                              f"{TRAJECTORY_STAMPS}")
        if not self.trajectory_horizon > 0:
            raise ConfigError(f"trajectory_horizon {self.trajectory_horizon} s must be > 0")
        if not self.object_max_age_s > 0:
            raise ConfigError(f"object_max_age_s {self.object_max_age_s} s must be > 0")
        if not self.watchdog_periods > 0 or self.watchdog_recover_periods < 0:
            raise ConfigError("watchdog_periods must be > 0 and watchdog_recover_periods "
                              ">= 0")
