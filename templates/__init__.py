"""The report site's Jinja templates and static assets, shipped as package data.

This folder is installed as ``sandbox_replay.templates`` (see pyproject.toml); the file
exists only so the folder is a regular package that ``importlib.resources`` can open.
"""
