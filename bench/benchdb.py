"""What every benchmark shares: Django set up on a throwaway database, never the developer's."""

import os
from urllib.parse import urlsplit


def setup_django(database_url: str) -> None:
    # The URL must be in the environment before settings are read, i.e. before setup().
    os.environ["DATABASE_URL"] = database_url
    # DEBUG keeps every SQL query in memory, which would inflate both time and RSS; a
    # benchmark measures production behaviour whatever the developer's shell says.
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate.settings")
    import django

    django.setup()


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme in {"postgres", "postgresql", "pgsql", "postgis"}


def database_url(server_url: str, name: str) -> str:
    """The URL of database `name` on the server of `server_url`."""
    return urlsplit(server_url)._replace(path=f"/{name}").geturl()


def recreate_database(server_url: str, name: str, *, create: bool = True) -> str:
    """Drop database `name` on the server of `server_url`, create it empty unless
    `create` is false, and return its URL."""
    import psycopg2

    # libpq understands postgres:// URIs itself, so the developer's URL is used as is.
    conn = psycopg2.connect(server_url)
    conn.autocommit = True  # CREATE/DROP DATABASE cannot run inside a transaction
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")
            if create:
                cur.execute(f"CREATE DATABASE {name}")
    finally:
        conn.close()
    return database_url(server_url, name)
