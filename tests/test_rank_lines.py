"""mpirun's tagged output back into whole lines per rank (rank_output.RankLines). With PYTHONUNBUFFERED a print is
two writes (the text, then the newline), and mpirun tags each; a rank's stdout and stderr pieces then share
physical lines. A user's line must never be glued to a control line (which the launcher hides)."""
from parallax.launcher.rank_output import RankLines


def test_a_control_line_split_around_a_user_line_keeps_both():
    # As seen on the test bed: worker 0's last log line was hidden with the control line, and an empty line shown.
    lines = RankLines()
    out = lines.feed("[1,0]<stderr>:parallax-control: done 600[1,0]<stdout>:worker 0 step 600 images/s 884"
                     "[1,0]<stderr>:")
    out += lines.feed("[1,0]<stdout>:")
    assert out == [(0, "parallax-control: done 600"), (0, "worker 0 step 600 images/s 884")]


def test_pieces_of_one_rank_join_and_ranks_stay_apart():
    lines = RankLines()
    out = lines.feed("[1,1]<stdout>:hel[1,0]<stdout>:a whole line")
    out += lines.feed("[1,1]<stdout>:lo")
    assert out == [(0, "a whole line"), (1, "hello")]


def test_mpiruns_own_lines_and_an_unfinished_piece():
    lines = RankLines()
    noticed = "mpirun noticed that process rank 1 exited"
    assert lines.feed(noticed) == [(None, noticed)]
    assert lines.feed("[1,2]<stderr>:Traceback[1,2]<stdout>:x") == [(2, "x")]
    assert lines.rest() == [(2, "Traceback")] and lines.rest() == []
