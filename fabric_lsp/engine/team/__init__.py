"""Team recall on PostgreSQL (docs/team.md).

Members push the derived records of the sessions they opted in (`push.py`: the same
normalized records, term counts and segment starts the local engine builds, never raw
JSONL) into one database (`schema.py`); `query.py` answers `scope: "team"` recall with
candidate selection and BM25 scoring in SQL, and assembles the answer with the local
engine's own functions, so it equals a local `scope: "global"` over the same sessions
with every session hot. No pygls here: the server and the CLI call in.
"""
