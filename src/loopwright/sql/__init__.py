"""SQL storage: SQLAlchemy 2 (async) on an SQLite file or PostgreSQL, with migrations shipped inside.

``Database(url)`` opens either backend (``database_url`` explains the URLs it takes);
``await db.migrate()`` creates or upgrades the schema; :mod:`loopwright.sql.models` holds the tables.
"""

from loopwright.sql._database import Database
from loopwright.sql._engine import DEFAULT_DB_FILE, create_engine, database_url
from loopwright.sql.migrate import current_revision, downgrade, head_revision, upgrade

__all__ = [
    "DEFAULT_DB_FILE",
    "Database",
    "create_engine",
    "current_revision",
    "database_url",
    "downgrade",
    "head_revision",
    "upgrade",
]
