"""Packaging shim: ships the top-level cl_kernels/ and devices/ folders as cltorch package data.

All metadata lives in pyproject.toml; only the package list and its folder mapping are computed here.
"""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["cltorch", "cltorch.*"]) + ["cltorch.cl_kernels", "cltorch.devices"],
    package_dir={"cltorch.cl_kernels": "cl_kernels", "cltorch.devices": "devices"},
    package_data={"cltorch.cl_kernels": ["*.mako", "*.cl", "*.h"], "cltorch.devices": ["*.toml"]},
)
