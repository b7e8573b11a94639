"""An accepted answer always fits a journal record (lane_runner/run/fit.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from journal.record import MAX_RECORD_BYTES
from lane_runner.run import fit

texts = st.one_of(
    st.text(max_size=50),
    st.builds(lambda c, n: c * n, st.sampled_from(["a", "\x00", "é", "\U0001f600"]),
              st.integers(0, 300_000)),
)
results = st.fixed_dictionaries({
    "status": st.just("completed"),
    "summary": texts,
    **{name: st.lists(texts, max_size=40) for name in fit.LISTS},
})


@given(results)
def test_a_fitted_answer_fits_a_record_with_its_summary_twice(result: dict[str, Any]) -> None:
    kept = fit.fitted(result, "main")
    record = {"result": kept, "summary": kept["summary"], "metadata": {}}
    assert len(fit.orjson.dumps(record)) < MAX_RECORD_BYTES // 2
    assert fit.fitted(kept, "main") == kept or kept is not result  # fitting twice: no growth
    if kept is result:
        return
    assert kept["findings"][-1].startswith("lane-runner cut this answer to fit")
    kept_lists = {name: kept[name] for name in fit.LISTS} | {"findings": kept["findings"][:-1]}
    for name, items in kept_lists.items():
        assert all(item in result[name] or "more characters]" in item for item in items)


def test_an_answer_that_fits_is_kept_as_it_is() -> None:
    result = {"status": "completed", "summary": "done", **{name: ["x"] for name in fit.LISTS}}
    assert fit.fitted(result, "main") is result
