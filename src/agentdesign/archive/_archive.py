"""The archive: every run, agent, evaluation and task result, kept in one SQL database.

`Archive` is assembled from one class per concern, each in its own module: the engine and schema
(`_engine`, `_schema`, `_sqlite`), the writes (`_writes`), the queries (`_queries`) and the leases
(`_lease`); the input checks they all use are in `_validation`.
"""

from __future__ import annotations

from agentdesign.archive._lease import Leases
from agentdesign.archive._queries import Queries
from agentdesign.archive._writes import Writes

__all__ = ["Archive"]


class Archive(Writes, Queries, Leases):
    """Runs, agents, evaluations and task results, in SQLite or any SQLAlchemy database.

    A plain file path means a SQLite file. Methods return frozen records, never ORM rows.
    """
