import pytest
import tensorflow as tf

from parallax import Config, ConfigError


def test_defaults_are_single_device_equivalent():
    c = Config()
    assert (c.run_option, c.average_dense, c.average_sparse, c.sync) == ("HYBRID", None, None, True)
    assert c.local_aggregation and c.place_post_aggregation_ops and c.place_boundary_ops
    assert c.checkpoint_dir is None and c.save_checkpoint_steps is None and c.log_dir is None


@pytest.mark.parametrize("kwargs, message", [
    ({"run_option": "ALLREDUCE"}, r"Config.run_option='ALLREDUCE' is not allowed; use one of 'HYBRID', 'PS', 'MPI'"),
    ({"run_option": "hybrid"}, r"run_option='hybrid'"),
    ({"average_dense": 1}, r"Config.average_dense=1 must be True or False"),
    ({"sync": "yes"}, r"Config.sync='yes' must be True or False"),
    ({"local_aggregation": None}, r"Config.local_aggregation=None"),
    ({"save_checkpoint_steps": 0, "checkpoint_dir": "/tmp/x"}, r"save_checkpoint_steps=0 must be a positive int"),
    ({"save_checkpoint_steps": True, "checkpoint_dir": "/tmp/x"}, r"save_checkpoint_steps=True"),
    ({"save_checkpoint_steps": 10}, r"checkpoint_dir is None"),
    ({"log_dir": ""}, r"Config.log_dir='' must be a non-empty path"),
    ({"checkpoint_dir": 5}, r"Config.checkpoint_dir=5"),
    ({"session_config": {"allow_soft_placement": True}}, r"session_config must be a tf.compat.v1.ConfigProto"),
    ({"profile_steps": [3], "log_dir": "/tmp/x"}, r"Config.profile_steps=\[3\] must be a tuple of ints >= 1"),
    ({"profile_steps": (0,), "log_dir": "/tmp/x"}, r"profile_steps=\(0,\)"),
    ({"profile_workers": (-1,)}, r"profile_workers=\(-1,\) must be a tuple of ints >= 0"),
    ({"profile_steps": (3,)}, r"profile_steps is set but Config.log_dir is None"),
    ({"methods": {"emb": "ALLGATHER"}}, r"Config.methods=\{'emb': 'ALLGATHER'\} must map variable names to one of 'AR', "
                                       r"'AG', 'PS'"),
    ({"methods": [("emb", "AG")]}, r"Config.methods=\[\('emb', 'AG'\)\]"),
])
def test_bad_values_name_the_field_and_what_is_allowed(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Config(**kwargs)


def test_valid_non_defaults_and_replace():
    proto = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1)
    c = Config(run_option="PS", sync=False, checkpoint_dir="/tmp/ck", save_checkpoint_steps=5, session_config=proto)
    assert c.session_config is proto
    assert c.replace(run_option="MPI").run_option == "MPI"
    with pytest.raises(ConfigError):
        c.replace(run_option="NOPE")
