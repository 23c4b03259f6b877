"""A PostgreSQL server of the tests' own: initdb in a temporary folder, pg_ctl on a free
localhost port, stopped and removed afterwards. Debian's package `postgresql` provides the
programs (`make postgres` installs it as root); PostgreSQL refuses to run as root, so as root
the server runs as the package's `postgres` user."""

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _program(name: str) -> str:
    """initdb and pg_ctl: on PATH, or where Debian puts them (/usr/lib/postgresql/<version>/bin)."""
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))[::-1]), None
    )
    if found is None:
        raise RuntimeError(
            f"PostgreSQL's {name} is not installed: run `make postgres` (Debian: apt-get install postgresql)"
        )
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def postgres_server(database: str = "gradebook") -> Iterator[str]:
    """A running server with an empty ``database``; yields its SQLAlchemy URL."""
    import psycopg

    owner = "postgres" if os.getuid() == 0 else None  # PostgreSQL will not run as root
    folder = Path(tempfile.mkdtemp(prefix="course-postgres-"))
    if owner:
        shutil.chown(folder, user=owner)
    data, port = folder / "data", _free_port()
    run = {"check": True, "capture_output": True, "text": True, "user": owner, "timeout": 120}
    try:
        subprocess.run(
            [_program("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"], **run
        )
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            [_program("pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start"],
            **run,
        )
        try:
            with psycopg.connect(
                f"host=127.0.0.1 port={port} user=postgres dbname=postgres", autocommit=True
            ) as db:
                db.execute(f'CREATE DATABASE "{database}"')
            yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"
        finally:
            subprocess.run([_program("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], **run)
    except subprocess.CalledProcessError as error:
        log = (folder / "log").read_text() if (folder / "log").exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {error.stderr}{log[-2000:]}") from error
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def owner_exists() -> bool:
    """As root, the `postgres` user the server runs as (Debian's package makes it)."""
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return False
    return True
