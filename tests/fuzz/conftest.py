"""The fuzz suite (hypothesis). `XRGW_FUZZ_EXAMPLES=N` scales the number of examples
(default 100 for the cheapest tests); see fuzz_support.py, which the tests import by its
bare name: pytest's default import mode puts this folder (no __init__.py) on the path."""
