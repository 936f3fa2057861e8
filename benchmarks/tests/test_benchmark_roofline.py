"""The benchmark report's roofline: the parent's measurement reaches the case processes, and a
malformed one is refused with what was expected."""
import json

import pytest

from benchmarks import roofline


def test_given_limits_are_used_as_they_are(monkeypatch):
    given = {"dgemm_gflop_s": 90.0, "dgemm_n": 2000, "copy_gb_s": 30.0, "threads": 2}
    monkeypatch.setenv(roofline.ENV, json.dumps(given))
    assert roofline.limits("full") == given
    assert roofline.fraction(45.0, given["dgemm_gflop_s"]) == 0.5
    assert roofline.fraction(None, 1.0) is None and roofline.fraction(1.0, 0) is None


@pytest.mark.parametrize("text", ["0", "not json", json.dumps({"copy_gb_s": 1.0})])
def test_malformed_limits_are_refused(monkeypatch, text):
    monkeypatch.setenv(roofline.ENV, text)
    with pytest.raises(ValueError, match="dgemm_gflop_s and copy_gb_s.*unset"):
        roofline.limits("full")
