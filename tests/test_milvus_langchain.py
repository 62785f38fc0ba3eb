"""LangChain's ``Milvus`` vector store (langchain-milvus, on pymilvus) against the Milvus
face, with langchain_core's deterministic fake embedding: add, search with a filter,
delete."""

from __future__ import annotations

from pathlib import Path

import pytest
from milvus_stack import milvus_stack

langchain_milvus = pytest.importorskip("langchain_milvus", reason="the dev extra pins it")


def test_vector_store_add_search_delete(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding

    for s in milvus_stack(request, tmp_path):
        store = langchain_milvus.Milvus(
            DeterministicFakeEmbedding(size=16),
            collection_name="lc",
            connection_args={"uri": s.milvus_uri},
            consistency_level="Strong",
            auto_id=True,
        )
        texts = ["kites over fields", "a harbour at dawn", "kites in the wind", "snowy peaks"]
        docs = [
            Document(page_content=t, metadata={"topic": "kites" if "kites" in t else "other"})
            for t in texts
        ]
        ids = store.add_documents(docs)
        assert len(ids) == 4
        top = store.similarity_search("kites in the wind", k=1)
        assert top[0].page_content == "kites in the wind"  # the same text embeds the same
        kites = store.similarity_search("snowy peaks", k=4, expr='topic == "kites"')
        assert {d.page_content for d in kites} == {"kites over fields", "kites in the wind"}
        scored = store.similarity_search_with_score("a harbour at dawn", k=2)
        assert scored[0][0].page_content == "a harbour at dawn"
        store.delete(ids=[ids[0]])
        left = store.similarity_search("kites over fields", k=4)
        assert "kites over fields" not in {d.page_content for d in left} and len(left) == 3
