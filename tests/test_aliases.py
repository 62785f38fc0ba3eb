"""Collection aliases (Milvus's create/alter/drop/describe/list_aliases): the catalog's rules,
data calls through an alias reaching the collection it names, and alter_alias seen at once
by every proxy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from conftest import cli, cli_json, raises_code, run_elanus

from elanus import ErrorCode

if TYPE_CHECKING:
    from conftest import Stack, StandaloneProcess

    from elanus.client.client import Client

STRONG = "Strong"


def _collections(client: Client, *names: str) -> None:
    for name in names:
        client.create_collection(name, dimension=3, metric_type="L2")


def _rows(ids: list[int]) -> list[dict[str, Any]]:
    return [{"id": i, "vector": [float(i), 0.0, 0.0]} for i in ids]


def _ids(client: Client, name: str) -> list[int]:
    rows = client.query(name, "id >= 0", ["id"], consistency_level=STRONG)
    return sorted(int(r["id"]) for r in rows)


def test_create_describe_list_alter_drop(stack: Stack) -> None:
    client = stack.client()
    _collections(client, "books", "books_v2")
    client.create_alias("books", "pub")
    client.create_alias("books", "library")
    assert client.describe_alias("pub") == {
        "alias": "pub",
        "collection_name": "books",
        "db_name": "default",
    }
    assert client.list_aliases("books") == {
        "aliases": ["library", "pub"],
        "collection_name": "books",
        "db_name": "default",
    }
    assert client.list_aliases() == {"aliases": ["library", "pub"], "db_name": "default"}
    assert client.list_aliases("books_v2")["aliases"] == []
    described = client.describe_collection("pub")
    assert (described["name"], described["aliases"]) == ("books", ["library", "pub"])
    assert client.has_collection("pub") and not client.has_collection("nope")
    client.create_alias("books", "pub")  # the same alias for the same collection: a no-op
    assert client.list_aliases("books")["aliases"] == ["library", "pub"]

    client.alter_alias("books_v2", "pub")
    assert client.describe_alias("pub")["collection_name"] == "books_v2"
    assert client.list_aliases("books")["aliases"] == ["library"]
    assert (
        client.describe_collection("pub")["collection_id"]
        == (client.describe_collection("books_v2")["collection_id"])
    )

    client.drop_alias("pub")
    raises_code(ErrorCode.ALIAS_NOT_FOUND, lambda: client.describe_alias("pub"), "'pub'")
    assert not client.has_collection("pub")
    raises_code(ErrorCode.COLLECTION_NOT_FOUND, lambda: client.describe_collection("pub"))
    assert client.list_collections() == ["books", "books_v2"]  # no collection went with it

    stack.restart()  # aliases live in the coord's catalog
    client = stack.client()
    assert client.describe_alias("library")["collection_name"] == "books"


def test_data_calls_through_an_alias_follow_alter_on_every_proxy(stack: Stack) -> None:
    client = stack.client()
    _collections(client, "books", "books_v2")
    client.create_alias("books", "pub")
    for name in ("pub", "books_v2"):  # load through the alias too
        client.load_collection(name)
    assert client.get_load_state("pub")["state"] == "Loaded"

    client.insert("pub", _rows([1, 2, 3]))
    client.upsert("pub", _rows([3]))
    client.delete("pub", ids=[2])
    client.flush("pub")
    assert _ids(client, "books") == [1, 3]
    assert _ids(client, "pub") == [1, 3]
    assert _ids(client, "books_v2") == []
    (hits,) = client.search("pub", [[3.0, 0.0, 0.0]], limit=1, consistency_level=STRONG)
    assert hits[0]["id"] == 3
    assert [r["id"] for r in client.get("pub", [1, 2], consistency_level=STRONG)] == [1]
    assert client.list_partitions("pub") == ["_default"]

    second = stack.add_proxy()
    other = stack.client(second.uri)
    assert _ids(other, "pub") == [1, 3]
    cached = second.cache.get("default", "pub")  # the second proxy caches what "pub" names
    assert cached is not None and cached.name == "books"

    client.alter_alias("books_v2", "pub")
    client.insert("pub", _rows([10, 11]))
    assert _ids(client, "pub") == [10, 11]
    assert second.cache.get("default", "pub") is None  # the coord had it dropped
    assert _ids(other, "pub") == [10, 11]
    (hits,) = other.search("pub", [[10.0, 0.0, 0.0]], limit=1, consistency_level=STRONG)
    assert hits[0]["id"] == 10
    assert _ids(other, "books") == [1, 3]
    client.release_collection("pub")
    assert client.get_load_state("books_v2")["state"] == "NotLoad"
    assert client.get_load_state("books")["state"] == "Loaded"


def test_refused_alias_calls_name_the_problem_and_change_nothing(stack: Stack) -> None:
    client = stack.client()
    _collections(client, "books", "films")
    client.create_alias("books", "pub")

    def unchanged() -> None:
        assert client.list_collections() == ["books", "films"]
        assert client.list_aliases() == {"aliases": ["pub"], "db_name": "default"}
        assert client.describe_alias("pub")["collection_name"] == "books"

    raises_code(
        ErrorCode.COLLECTION_ALREADY_EXISTS,
        lambda: client.create_alias("books", "films"),
        "'films'",
        "name of a collection",
    )
    raises_code(
        ErrorCode.ALIAS_ALREADY_EXISTS,
        lambda: client.create_alias("films", "pub"),
        "'pub'",
        "'books'",
        "alter_alias",
    )
    raises_code(ErrorCode.COLLECTION_NOT_FOUND, lambda: client.create_alias("nope", "x"), "'nope'")
    raises_code(
        ErrorCode.COLLECTION_NOT_FOUND,
        lambda: client.create_alias("pub", "x"),
        "'pub'",
        "it is an alias",
    )
    for call in (
        lambda: client.describe_alias("ghost"),
        lambda: client.drop_alias("ghost"),
        lambda: client.alter_alias("films", "ghost"),
    ):
        raises_code(ErrorCode.ALIAS_NOT_FOUND, call, "'ghost'")
    raises_code(ErrorCode.COLLECTION_ALREADY_EXISTS, lambda: client.alter_alias("films", "books"))
    raises_code(
        ErrorCode.ALIAS_ALREADY_EXISTS,
        lambda: client.create_collection("pub", dimension=3),
        "'pub'",
        "is an alias",
    )
    raises_code(
        ErrorCode.ALIAS_ALREADY_EXISTS,
        lambda: client.rename_collection("films", "pub"),
        "'pub'",
    )
    raises_code(
        ErrorCode.INVALID_ARGUMENT,
        lambda: client.drop_collection("books"),
        "'books'",
        "'pub'",
        "drop_alias",
    )
    raises_code(
        ErrorCode.INVALID_ARGUMENT, lambda: client.drop_collection("pub"), "through its alias"
    )
    raises_code(
        ErrorCode.INVALID_ARGUMENT, lambda: client.create_alias("books", "bad-name"), "alias"
    )
    unchanged()

    client.create_database("other")  # aliases are per database
    raises_code(ErrorCode.INVALID_ARGUMENT, lambda: client.rename_collection("books", "b", "other"))
    unchanged()
    _collections_in(client, "other", "books")
    client.create_alias("books", "pub", db="other")
    assert client.describe_alias("pub", db="other")["db_name"] == "other"

    client.drop_alias("pub")
    client.drop_collection("books")  # without aliases it goes
    assert client.list_collections() == ["films"]


def _collections_in(client: Client, db: str, name: str) -> None:
    client.create_collection(name, dimension=3, db=db)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_cli_collection_alias_commands(server: StandaloneProcess) -> None:
    for name in ("songs", "songs_v2"):
        cli(server, "collection", "create", name, "--dim", "4")
    assert cli_json(server, "collection", "alias", "create", "songs", "tunes") == {
        "alias": "tunes",
        "collection": "songs",
    }
    assert "created alias hits for songs" in cli(
        server, "collection", "alias", "create", "songs", "hits"
    )
    assert cli_json(server, "collection", "alias", "list", "songs")["aliases"] == ["hits", "tunes"]
    assert "tunes" in cli(server, "collection", "describe", "songs")
    cli(server, "collection", "alias", "alter", "songs_v2", "tunes")
    assert cli_json(server, "collection", "alias", "describe", "tunes") == {
        "alias": "tunes",
        "collection_name": "songs_v2",
        "db_name": "default",
    }
    assert "songs_v2" in cli(server, "collection", "alias", "describe", "tunes")
    assert cli_json(server, "collection", "alias", "drop", "tunes") == {"dropped": "tunes"}
    assert cli_json(server, "collection", "alias", "list") == {
        "aliases": ["hits"],
        "db_name": "default",
    }
    refused = run_elanus("collection", "alias", "describe", "tunes", "--uri", server.uri)
    assert refused.returncode != 0 and "ALIAS_NOT_FOUND" in refused.stderr
