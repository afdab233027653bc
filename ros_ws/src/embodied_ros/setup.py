"""ament_python package: builds with colcon on a ROS 2 machine, and pip-installs into a venv."""

from glob import glob

from setuptools import setup

PACKAGE = "embodied_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=[PACKAGE],
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="embodied maintainers",
    maintainer_email="maintainers@example.org",
    description="ROS 2 bridge of the embodied stack: policy node and simulated robot node.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            f"policy_node = {PACKAGE}.policy_node:main",
            f"sim_robot_node = {PACKAGE}.sim_robot_node:main",
        ],
    },
)
