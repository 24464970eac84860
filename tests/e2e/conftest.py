"""Fixtures for the end-to-end tests (see fabric_e2e_harness)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fabric_e2e_harness import EDITORS, make_agent_dir


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_agent_dir(tmp_path_factory.mktemp("e2e"))


@pytest.fixture(scope="module", params=EDITORS)
def editor(request: pytest.FixtureRequest) -> str:
    return request.param
