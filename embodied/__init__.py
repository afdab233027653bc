"""The embodied library: reward models, learners, datasets, export and the CLI commands."""
