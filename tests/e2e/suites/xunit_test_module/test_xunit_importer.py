"""An engine from a helper of another test module (`test_xunit_owner.py`), deleted and
collected by hand: fixed with that module as one unit."""

import gc

from test_xunit_owner import build_engine, greedy_texts


def test_importer_generates():
    llm = build_engine(seed=4)
    texts = greedy_texts(llm, ["the capital of france is"])
    del llm
    gc.collect()
    assert texts
