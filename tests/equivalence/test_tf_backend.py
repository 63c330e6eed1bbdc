"""The equivalence promise on TensorFlow's own collectives (Config.collective_backend="tf") in the Horovod
environment, where "auto" takes them for every plan with sparse rows or servers: on two loopback hosts, with 2 and 4
workers, against one process with the total batch. The cases are the ones whose collectives differ most: rows of
changing count (deduplicated ids, sampled candidates, a partitioned embedding), a clip scale broadcast from the
chief, a mixed plan, and rows of state gathered in an element-wise sharded input's order. With 2 workers they run in MPI, which allgathers
every sparse variable's rows (those behind one input in one grouped allgather); `make test TF=2.21` runs the same graphs in HYBRID on these collectives."""
import pytest

from tests.equivalence.harness import check_case, two_hosts

TWO_WORKERS = ("sparse_input_clip", "sampled_softmax_clip", "tied_embedding_two_optimizers_clip",
               "ema_of_server_and_replicated_variables", "while_loop_gradients_with_embedding_ref",
               "grad_accumulation", "embedding_clip_adam_partitioned", "memory_bank_sharded")
# the partitioned embedding: its two parts' rows in one grouped allgather, cut back across 4 workers
FOUR_WORKERS = (("mixed_methods", "HYBRID"), ("embedding_clip_adam_partitioned", "MPI"))


@pytest.mark.parametrize("case", TWO_WORKERS)
def test_tf_collectives_are_exact_with_two_workers(tmp_path_factory, case):
    diff = check_case(tmp_path_factory.mktemp("eq"), case, 2, "MPI", spec=two_hosts(2), backend="tf")
    print(f"tf MPI {case} N=2: max abs diff {diff:.3g}")


@pytest.mark.parametrize("case,mode", FOUR_WORKERS)
def test_tf_collectives_are_exact_with_four_workers(tmp_path_factory, case, mode):
    diff = check_case(tmp_path_factory.mktemp("eq"), case, 4, mode, spec=two_hosts(4), backend="tf")
    print(f"tf {mode} {case} N=4: max abs diff {diff:.3g}")
