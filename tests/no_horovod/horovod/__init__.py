"""Put this directory first on PYTHONPATH to run as on a machine without Horovod (tests/test_tf_collectives.py)."""
raise ImportError("No module named 'horovod' (hidden for a test by tests/no_horovod)")
