"""An LMDB whose bytes were changed after stallscope wrote it (issue 29): a str field that is
not UTF-8 is one clear error naming the sample and the field; `verify` counts what a missing
chunk stands for."""

from __future__ import annotations

import textwrap

import lmdb
import pytest
from test_lmdb_hostile import DYING, cli, one_line_error, rewrite, small_lmdb

from stallscope.core.errors import StallscopeError
from stallscope.core.jobs import run_job
from stallscope.core.lmdb import format as fmt
from stallscope.core.lmdb.convert import convert
from stallscope.core.lmdb.dataset import LMDBDataset
from stallscope.core.lmdb.verify import verify

pytestmark = pytest.mark.runner  # the CLI runs in a child

NAMES = textwrap.dedent(
    """
    class Named:
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return {"label": i, "caption": f"caption-{i:03d}"}

    def make():
        return Named()
    """
)


def test_a_str_field_that_is_not_utf8_names_the_sample_and_the_field(tmp_path):
    (tmp_path / "named.py").write_text(NAMES)
    dst = tmp_path / "named.lmdb"
    run_job(convert(f"{tmp_path / 'named.py'}:make", dst, workers=0))
    env = lmdb.open(str(dst))
    with env.begin() as txn:
        chunk = bytes(txn.get(fmt.sample_key(0)))
    env.close()
    assert chunk.count(b"caption-004") == 1
    rewrite(dst, fmt.sample_key(0), chunk.replace(b"caption-004", b"caption\xff\xfe004"))
    ds = LMDBDataset(dst)
    assert ds[3] == {"label": 3, "caption": "caption-003"}  # the others stand
    with pytest.raises(StallscopeError) as err:
        ds[4]
    assert str(err.value) == (f"{dst}: sample 4, field 'caption' (str) holds bytes that are "
                              "not UTF-8 (at byte 7)")
    with pytest.raises(StallscopeError, match="sample 4, field 'caption'"):
        ds[[2, 3, 4]]
    ds.close()


def test_verify_on_a_missing_chunk_counts_its_samples(tmp_path):
    dst = small_lmdb(tmp_path)  # 30 samples in one chunk
    env = lmdb.open(str(dst))
    with env.begin(write=True) as txn:
        assert txn.delete(fmt.sample_key(0))
    env.close()
    result = run_job(verify(dst, n=0))
    assert result.damaged == ["samples 0..29: chunk 0 is missing"]
    assert result.summary() == "30 damaged record(s) of 30"
    done = cli("verify", dst, "--samples", "5")
    out = done.stdout.decode()
    assert done.returncode == 1, (out, done.stderr)
    assert "30 damaged record(s) of 30" in out and "5 of 5 checked samples differ" in out
    assert " of 0" not in out


@pytest.mark.parametrize("dies_at, workers", [(37, 0), (0, 0), (0, 2)])
def test_os_exit_in_the_converters_own_process_is_one_line(tmp_path, dies_at, workers):
    """workers=0 and the first samples (read in this process to settle the structure) call
    __getitem__ here: its os._exit(3) is named, not the converter's silent end (rc 3)."""
    (tmp_path / "dying.py").write_text(DYING.replace("if i == 37:", f"if i == {dies_at}:"))
    (tmp_path / "dying.how").write_text("exit")
    dst = tmp_path / "d.lmdb"
    done = cli("convert", f"{tmp_path / 'dying.py'}:make", dst, "--workers", workers,
               "--commit-every", "4", timeout=60)
    err = one_line_error(done)
    assert f"sample {dies_at} (dying.py:make[{dies_at}]) called os._exit(3) in __getitem__" \
        in err, err
