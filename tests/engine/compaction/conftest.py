import sys
from pathlib import Path

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

FIXTURES = HERE.parent.parent / "fixtures" / "compaction"
REAL_SESSIONS = HERE.parent.parent / "fixtures" / "real-sessions"
