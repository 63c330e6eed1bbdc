"""What `import parallax` offers and does: a small __all__, the old spellings still importable, no TensorFlow."""
import os
import subprocess
import sys

import parallax
from parallax import errors


def test_all_is_what_a_user_calls():
    assert sorted(parallax.__all__) == sorted(["Config", "ResourceSpec", "Host", "ParallaxError", "get_runner",
                                               "Runner", "shard", "shared_input", "get_partitioner", "explain"])


def test_every_error_class_keeps_its_old_spelling():
    classes = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, errors.ParallaxError)]
    assert len(classes) > 10 and all(getattr(parallax, c.__name__) is c for c in classes)


def test_the_original_parallax_names_are_importable_from_parallax_and_live_in_legacy():
    from parallax import CheckPointConfig, CommunicationConfig, MPIConfig, ProfileConfig, PSConfig  # noqa: F401
    from parallax.legacy import config as legacy_config
    assert parallax.PSConfig is legacy_config.PSConfig
    assert callable(parallax.partition.get_partitions) and callable(parallax.shard.create_num_shards_and_shard_id)


def test_an_unknown_name_is_an_attribute_error():
    try:
        parallax.get_runnner
    except AttributeError as e:
        assert "get_runnner" in str(e)
    else:
        raise AssertionError("parallax.get_runnner did not fail")


def test_import_parallax_has_only_its_documented_effects():
    code = ("import logging, os, sys; before = set(logging.root.manager.loggerDict); env = dict(os.environ); "
            "import parallax; "
            "print('tensorflow' in sys.modules, sorted(set(logging.root.manager.loggerDict) - before), "
            "sorted(k for k in os.environ if os.environ.get(k) != env.get(k)))")
    env = {k: v for k, v in __import__("os").environ.items() if k != "TF_USE_LEGACY_KERAS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    import importlib.util
    changed = ["TF_USE_LEGACY_KERAS"] if importlib.util.find_spec("tf_keras") else []
    assert out.strip() == f"False [] {changed}", out


def test_with_tf_keras_installed_an_empty_or_absent_legacy_keras_setting_becomes_1_and_a_users_value_wins(tmp_path):
    (tmp_path / "tf_keras").mkdir()
    (tmp_path / "tf_keras" / "__init__.py").write_text("")  # found by find_spec, as an installed tf_keras is
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    code = "import os, parallax; print(repr(os.environ.get('TF_USE_LEGACY_KERAS')))"
    base = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    base["PYTHONPATH"] = os.pathsep.join([str(tmp_path), root])
    for given, expected in ((None, "'1'"), ("", "'1'"), ("0", "'0'"), ("True", "'True'")):
        env = dict(base, **({} if given is None else {"TF_USE_LEGACY_KERAS": given}))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected, (given, out.stdout, out.stderr)
