"""The learner registry: one class per ``algo.name``, each with the Learner protocol's members."""

from __future__ import annotations

import pytest

from embodied.config import ConfigError
from embodied.learners.base import Learner, register_learner
from embodied.learners.factory import learner_class, learner_names

MEMBERS = [m for m in dir(Learner) if not m.startswith("_")] + list(Learner.__annotations__)


def test_every_algo_config_has_a_learner():
    from embodied.config import config_dir

    assert set(learner_names()) == {p.stem for p in (config_dir() / "algo").glob("*.yaml")}


@pytest.mark.parametrize("name", learner_names())
def test_learners_have_the_protocol_members(name):
    cls = learner_class(name)
    missing = [m for m in MEMBERS if not hasattr(cls, m)]
    assert not missing, f"{cls.__name__} lacks {missing}"
    assert cls.checkpoint_suffix in (".pt", ".zip")


def test_unknown_algo_and_double_registration():
    with pytest.raises(ConfigError, match=r"unknown algo 'ppo2'.*ppo"):
        learner_class("ppo2")
    with pytest.raises(ValueError, match="registered twice"):
        register_learner("ppo")(type("Other", (), {}))
