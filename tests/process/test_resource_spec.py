import pytest

from parallax import ResourceSpec, ResourceSpecError


def test_paper_style_with_device_ids_bare_hosts_and_ssh_details():
    spec = ResourceSpec.parse("# cluster\n10.0.0.1: 0,1,2\n\nbob@10.0.0.2:2222: 3, 5\n10.0.0.3   # one slot\n")
    assert [(h.hostname, h.slots, h.user, h.ssh_port) for h in spec.hosts] == [
        ("10.0.0.1", (0, 1, 2), None, None), ("10.0.0.2", (3, 5), "bob", 2222), ("10.0.0.3", (0,), None, None)]
    assert spec.num_workers == 6 and spec.num_hosts == 3
    assert spec.hosts[1].ssh_target == "bob@10.0.0.2"


@pytest.mark.parametrize("text, slots", [
    ("172.31.32.7 slots=8", {"172.31.32.7": 8}),  # Horovod's docs
    ("host1 slots=4\nhost2 slots=4", {"host1": 4, "host2": 4}),
    ("localhost slots=2 max_slots=4", {"localhost": 2}),
    ("alice@node1:22 slots=1", {"node1": 1}),
])
def test_mpi_hostfile_style(text, slots):
    spec = ResourceSpec.parse(text)
    assert {h.hostname: h.num_slots for h in spec.hosts} == slots


def test_h_string_form():
    spec = ResourceSpec.from_hosts_string("h1:2,h2:2")
    assert [(h.hostname, h.slots) for h in spec.hosts] == [("h1", (0, 1)), ("h2", (0, 1))]
    spec = ResourceSpec.from_hosts_string("u@h1:2222:3")
    assert (spec.hosts[0].user, spec.hosts[0].ssh_port, spec.hosts[0].num_slots) == ("u", 2222, 3)


def test_load_accepts_paths_text_h_strings_and_specs(tmp_path):
    path = tmp_path / "spec.txt"
    path.write_text("localhost: 0,1\n")
    assert ResourceSpec.load(str(path)).num_workers == 2
    assert ResourceSpec.load(path).source == str(path)
    assert ResourceSpec.load("localhost:3").num_workers == 3  # one line, no spaces: the -H form
    assert ResourceSpec.load("localhost: 3").hosts[0].slots == (3,)  # paper style: device id 3
    assert ResourceSpec.load("localhost").num_workers == 1
    spec = ResourceSpec.load("a slots=2\nb slots=1")
    assert ResourceSpec.load(spec) is spec and spec.num_workers == 3


def test_other_loopback_addresses_stay_separate_hosts():
    assert ResourceSpec.parse("127.0.0.1: 0\n127.0.0.2: 0").num_hosts == 2


def test_local_hosts():
    spec = ResourceSpec.parse("localhost\n127.0.0.2\nexample.invalid")
    assert [h.is_local for h in spec.hosts] == [True, True, False]


@pytest.mark.parametrize("text, message", [
    ("", r"spec.txt: the resource spec is empty"),
    ("# only a comment\n\n", r"spec.txt: the resource spec is empty"),
    ("h1: 0\nh2 0 1\n", r"spec.txt:2: cannot parse 'h2 0 1'"),
    ("h1: 0\n# x\nh1: 1\n", r"spec.txt:3: host 'h1' is listed twice \(line/item 1\)"),
    ("localhost: 0\n127.0.0.1: 1\n", r"spec.txt:2: host '127.0.0.1' is the same machine as 'localhost'"),
    ("[::1]: 0\n[0:0:0:0:0:0:0:1] slots=1\n", r"spec.txt:2: host '\[0:0:0:0:0:0:0:1\]' is the same machine as "
                                            r"'\[::1\]'"),
    ("localhost:2\n", r"spec.txt:1: 'localhost:2' is ambiguous in a spec file: for 2 slots write 'localhost "
                       r"slots=2'"),
    ("h1: 0,1,0\n", r"spec.txt:1: device id 0 is listed twice"),
    ("h1: -1\n", r"spec.txt:1: device id -1 is negative"),
    ("h1 slots=0\n", r"spec.txt:1: slots=0; a host needs at least 1 slot"),
    ("h1 slots=-2\n", r"spec.txt:1: slots=-2"),
    ("h1 slots=two\n", r"spec.txt:1: slots='two' is not a whole number"),
    ("h1 cpus=2\n", r"spec.txt:1: unknown hostfile option 'cpus'"),
    ("h1: 0,,1\n", r"spec.txt:1: cannot parse"),
])
def test_errors_name_the_file_and_line(tmp_path, text, message):
    path = tmp_path / "spec.txt"
    path.write_text(text)
    with pytest.raises(ResourceSpecError, match=message):
        ResourceSpec.load(str(path))


@pytest.mark.parametrize("text, message", [
    ("h1:0", r"item 1 'h1:0' has 0 slots"),
    ("h1:2,h1:2", r"host 'h1' is listed twice"),
])
def test_h_string_errors(text, message):
    with pytest.raises(ResourceSpecError, match=message):
        ResourceSpec.load(text)


def test_missing_file_and_wrong_type():
    with pytest.raises(ResourceSpecError, match="does not exist"):
        ResourceSpec.load("/no/such/spec.txt")
    with pytest.raises(ResourceSpecError, match="not int"):
        ResourceSpec.load(3)
