from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REAL_SESSIONS = FIXTURES / "real-sessions"


@pytest.fixture
def real_sessions() -> Path:
    return REAL_SESSIONS
