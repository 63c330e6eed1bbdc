"""The equivalence promise on TensorFlow's own collectives (Config.collective_backend="tf"): MPI and HYBRID, on
two loopback hosts, with 2 and 4 workers, against one process with the total batch. The cases are the ones whose
collectives differ most: rows of changing count (deduplicated ids, sampled candidates, a partitioned embedding), a
clip scale broadcast from the chief, a mixed plan, and random graphs covering every feature."""
import pytest

from tests.equivalence.harness import check_case, two_hosts

TWO_WORKERS = ("sparse_input_clip", "sampled_softmax_clip", "tied_embedding_two_optimizers_clip",
               "ema_of_server_and_replicated_variables", "while_loop_gradients_with_embedding_ref",
               "grad_accumulation", "embedding_clip_adam_partitioned", "random:21", "random:42", "random:162")
FOUR_WORKERS = (("mixed_methods", "HYBRID"), ("embedding_clip_adam", "MPI"), ("random:103", "HYBRID"))


@pytest.mark.parametrize("mode", ("MPI", "HYBRID"))
@pytest.mark.parametrize("case", TWO_WORKERS)
def test_tf_collectives_are_exact_with_two_workers(tmp_path_factory, case, mode):
    diff = check_case(tmp_path_factory.mktemp("eq"), case, 2, mode, spec=two_hosts(2), backend="tf")
    print(f"tf {mode} {case} N=2: max abs diff {diff:.3g}")


@pytest.mark.parametrize("case,mode", FOUR_WORKERS)
def test_tf_collectives_are_exact_with_four_workers(tmp_path_factory, case, mode):
    diff = check_case(tmp_path_factory.mktemp("eq"), case, 4, mode, spec=two_hosts(4), backend="tf")
    print(f"tf {mode} {case} N=4: max abs diff {diff:.3g}")
