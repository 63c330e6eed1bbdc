"""Everything that starts and supervises processes. Plain Python: this package never imports TensorFlow."""
