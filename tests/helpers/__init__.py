"""Code the tests share, one module per concern (rows are built in tests/factories/, fixtures live
in the nearest conftest.py). No test module imports another test module: tests/unit/test_layers.py
fails when one does."""
